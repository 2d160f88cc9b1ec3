package dkim

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/pem"
	"errors"
	"fmt"
)

// MinSecretLength is the shortest SENDONCE_SECRET_KEY Seal and Open
// accept, in bytes.
const MinSecretLength = 32

const (
	sealedBlockType = "SENDONCE ENCRYPTED PRIVATE KEY"
	sealVersion     = 1
	saltSize        = 16
	nonceSize       = 12
	hkdfInfo        = "sendonce dkim private key v1"
)

var (
	// ErrSecretRequired is returned by Open for a sealed key when no secret
	// is configured.
	ErrSecretRequired = errors.New("dkim: the private key is encrypted and SENDONCE_SECRET_KEY is not set")
	// ErrWrongSecret is returned by Open when the secret does not open the
	// sealed key (another secret, or the stored bytes were altered).
	ErrWrongSecret = errors.New("dkim: the private key cannot be decrypted with this SENDONCE_SECRET_KEY (wrong secret or corrupted data)")
)

// Seal returns the form of k to store in the database. With an empty
// secret it is the plaintext PKCS#8 PEM, and the caller should warn that
// the key is stored unencrypted; otherwise it is the sealed PEM described in
// the package documentation. A non-empty secret shorter than
// MinSecretLength is refused.
func Seal(k *Key, secret string) ([]byte, error) {
	if secret == "" {
		return k.MarshalPEM()
	}
	if err := checkSecret(secret); err != nil {
		return nil, err
	}
	der, err := marshalPKCS8(k)
	if err != nil {
		return nil, err
	}
	header := make([]byte, 1+saltSize, 1+saltSize+nonceSize+len(der)+16)
	header[0] = sealVersion
	if _, err := rand.Read(header[1:]); err != nil {
		return nil, fmt.Errorf("dkim: reading random salt: %w", err)
	}
	aead, err := newAEAD(secret, header[1:1+saltSize])
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, nonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("dkim: reading random nonce: %w", err)
	}
	out := append(header, nonce...)
	out = aead.Seal(out, nonce, der, header)
	return pem.EncodeToMemory(&pem.Block{Type: sealedBlockType, Bytes: out}), nil
}

// Open reads a key stored by Seal: sealed (which needs the secret it was
// sealed with) or plaintext PEM (read whatever the secret; IsSealed tells
// the caller it should be sealed now that a secret is configured).
func Open(stored []byte, secret string) (*Key, error) {
	block, rest := pem.Decode(stored)
	if block == nil {
		return nil, errors.New("dkim: stored key is not PEM")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, errors.New("dkim: unexpected data after the stored key")
	}
	if block.Type != sealedBlockType {
		return parseDER(block.Type, block.Bytes)
	}
	if secret == "" {
		return nil, ErrSecretRequired
	}
	if err := checkSecret(secret); err != nil {
		return nil, err
	}
	b := block.Bytes
	if len(b) < 1+saltSize+nonceSize+16 {
		return nil, errors.New("dkim: sealed key is truncated")
	}
	if b[0] != sealVersion {
		return nil, fmt.Errorf("dkim: sealed key has unknown format version %d", b[0])
	}
	header, nonce, ct := b[:1+saltSize], b[1+saltSize:1+saltSize+nonceSize], b[1+saltSize+nonceSize:]
	aead, err := newAEAD(secret, header[1:])
	if err != nil {
		return nil, err
	}
	der, err := aead.Open(nil, nonce, ct, header)
	if err != nil {
		return nil, ErrWrongSecret
	}
	return parseDER("PRIVATE KEY", der)
}

// IsSealed reports whether stored is a sealed key (as opposed to plaintext
// PEM or garbage).
func IsSealed(stored []byte) bool {
	block, _ := pem.Decode(stored)
	return block != nil && block.Type == sealedBlockType
}

func checkSecret(secret string) error {
	if len(secret) < MinSecretLength {
		return fmt.Errorf("dkim: SENDONCE_SECRET_KEY must be at least %d bytes of random (try: openssl rand -base64 32)", MinSecretLength)
	}
	return nil
}

func newAEAD(secret string, salt []byte) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, []byte(secret), salt, hkdfInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("dkim: deriving key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("dkim: %w", err)
	}
	return cipher.NewGCM(block)
}
