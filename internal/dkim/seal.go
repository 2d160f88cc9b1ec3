package dkim

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/sendonce/sendonce/internal/seal"
)

// MinSecretLength is the shortest SENDONCE_SECRET_KEY Seal and Open
// accept, in bytes.
const MinSecretLength = 32

const (
	sealedBlockType = "SENDONCE ENCRYPTED PRIVATE KEY"
	sealVersion     = 1
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
	out, err := seal.Seal([]byte{sealVersion}, secret, hkdfInfo, der)
	if err != nil {
		return nil, fmt.Errorf("dkim: %w", err)
	}
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
	if len(b) > 0 && b[0] != sealVersion {
		return nil, fmt.Errorf("dkim: sealed key has unknown format version %d", b[0])
	}
	der, err := seal.Open(b, 1, secret, hkdfInfo)
	switch {
	case errors.Is(err, seal.ErrTruncated):
		return nil, errors.New("dkim: sealed key is truncated")
	case errors.Is(err, seal.ErrOpen):
		return nil, ErrWrongSecret
	case err != nil:
		return nil, fmt.Errorf("dkim: %w", err)
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
