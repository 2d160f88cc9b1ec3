package webhook

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// A signing secret must be usable to sign, so it cannot be kept as a hash
// (as API keys are). With SENDONCE_SECRET_KEY set it is sealed — AES-256-GCM
// under a key derived with HKDF-SHA256 from that secret and a random salt,
// as DKIM keys are; without, it is kept as its whsec_ text, and the
// database must be protected like the secret itself (docs/security.md).

const (
	sealedPrefix = "sealed-v1:"
	saltSize     = 16
	nonceSize    = 12
	hkdfInfo     = "sendonce webhook signing secret v1"
)

// ErrSecretKey says a sealed signing secret cannot be opened: no
// SENDONCE_SECRET_KEY, or another one than it was sealed with.
var ErrSecretKey = errors.New("webhook: the signing secret is sealed and SENDONCE_SECRET_KEY does not open it")

func aead(secretKey string, salt []byte) (cipher.AEAD, error) {
	k, err := hkdf.Key(sha256.New, []byte(secretKey), salt, hkdfInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("webhook: derive key: %w", err)
	}
	b, err := aes.NewCipher(k)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return cipher.NewGCM(b)
}

// SealSecret returns the stored form of a signing secret: sealed under
// secretKey, or the secret itself when secretKey is empty.
func SealSecret(secret, secretKey string) ([]byte, error) {
	if secretKey == "" {
		return []byte(secret), nil
	}
	head := make([]byte, len(sealedPrefix)+saltSize+nonceSize)
	copy(head, sealedPrefix)
	if _, err := rand.Read(head[len(sealedPrefix):]); err != nil {
		return nil, fmt.Errorf("webhook: read random: %w", err)
	}
	salt := head[len(sealedPrefix) : len(sealedPrefix)+saltSize]
	nonce := head[len(sealedPrefix)+saltSize:]
	a, err := aead(secretKey, salt)
	if err != nil {
		return nil, err
	}
	return a.Seal(head, nonce, []byte(secret), head[:len(sealedPrefix)+saltSize]), nil
}

// OpenSecret returns the signing secret from its stored form.
func OpenSecret(stored []byte, secretKey string) (string, error) {
	if !bytes.HasPrefix(stored, []byte(sealedPrefix)) {
		return string(stored), nil
	}
	if secretKey == "" || len(stored) < len(sealedPrefix)+saltSize+nonceSize+16 {
		return "", ErrSecretKey
	}
	salt := stored[len(sealedPrefix) : len(sealedPrefix)+saltSize]
	nonce := stored[len(sealedPrefix)+saltSize : len(sealedPrefix)+saltSize+nonceSize]
	a, err := aead(secretKey, salt)
	if err != nil {
		return "", err
	}
	plain, err := a.Open(nil, nonce, stored[len(sealedPrefix)+saltSize+nonceSize:], stored[:len(sealedPrefix)+saltSize])
	if err != nil {
		return "", ErrSecretKey
	}
	return string(plain), nil
}
