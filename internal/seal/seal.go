// Package seal encrypts the secrets sendonce keeps in its database (DKIM
// private keys, webhook signing secrets) under SENDONCE_SECRET_KEY: one
// AES-256-GCM construction, so that both are sealed, and can be opened,
// the same way.
//
// A sealed value is head || salt || nonce || ciphertext. head is the
// caller's marker of its format (a version byte, a text prefix); the key is
// derived with HKDF-SHA256 from the secret key, a random salt of its own
// and the caller's info string, which keeps one kind of value from being
// opened as another; head and salt are authenticated with the ciphertext.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

const (
	saltSize  = 16
	nonceSize = 12
	tagSize   = 16
)

var (
	// ErrTruncated says the value is too short to have been sealed.
	ErrTruncated = errors.New("seal: sealed value is truncated")
	// ErrOpen says the secret key does not open the value: another key,
	// another info string, or altered bytes.
	ErrOpen = errors.New("seal: the secret key does not open the sealed value")
)

// Seal returns head || salt || nonce || the ciphertext of plain, under a key
// derived from secretKey, a fresh random salt and info.
func Seal(head []byte, secretKey, info string, plain []byte) ([]byte, error) {
	out := make([]byte, len(head)+saltSize+nonceSize, len(head)+saltSize+nonceSize+len(plain)+tagSize)
	copy(out, head)
	if _, err := rand.Read(out[len(head):]); err != nil {
		return nil, fmt.Errorf("seal: read random: %w", err)
	}
	salt, nonce := out[len(head):len(head)+saltSize], out[len(head)+saltSize:]
	a, err := newAEAD(secretKey, salt, info)
	if err != nil {
		return nil, err
	}
	return a.Seal(out, nonce, plain, out[:len(head)+saltSize]), nil
}

// Open returns the plaintext of sealed, whose first headLen bytes are the
// head it was sealed with: ErrTruncated or ErrOpen when it cannot.
func Open(sealed []byte, headLen int, secretKey, info string) ([]byte, error) {
	if len(sealed) < headLen+saltSize+nonceSize+tagSize {
		return nil, ErrTruncated
	}
	salt := sealed[headLen : headLen+saltSize]
	nonce := sealed[headLen+saltSize : headLen+saltSize+nonceSize]
	a, err := newAEAD(secretKey, salt, info)
	if err != nil {
		return nil, err
	}
	plain, err := a.Open(nil, nonce, sealed[headLen+saltSize+nonceSize:], sealed[:headLen+saltSize])
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}

func newAEAD(secretKey string, salt []byte, info string) (cipher.AEAD, error) {
	k, err := hkdf.Key(sha256.New, []byte(secretKey), salt, info, 32)
	if err != nil {
		return nil, fmt.Errorf("seal: derive key: %w", err)
	}
	b, err := aes.NewCipher(k)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return cipher.NewGCM(b)
}
