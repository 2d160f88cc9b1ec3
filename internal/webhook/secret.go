package webhook

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/sendonce/sendonce/internal/seal"
)

// A signing secret must be usable to sign, so it cannot be kept as a hash
// (as API keys are). With SENDONCE_SECRET_KEY set it is sealed (package
// seal: AES-256-GCM under a key derived with HKDF-SHA256 from that secret
// and a random salt, as DKIM keys are); without, it is kept as its whsec_
// text, and the database must be protected like the secret itself
// (docs/security.md).

const (
	sealedPrefix = "sealed-v1:"
	hkdfInfo     = "sendonce webhook signing secret v1"
)

// ErrSecretKey says a sealed signing secret cannot be opened: no
// SENDONCE_SECRET_KEY, or another one than it was sealed with.
var ErrSecretKey = errors.New("webhook: the signing secret is sealed and SENDONCE_SECRET_KEY does not open it")

// SealSecret returns the stored form of a signing secret: sealed under
// secretKey, or the secret itself when secretKey is empty.
func SealSecret(secret, secretKey string) ([]byte, error) {
	if secretKey == "" {
		return []byte(secret), nil
	}
	b, err := seal.Seal([]byte(sealedPrefix), secretKey, hkdfInfo, []byte(secret))
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return b, nil
}

// OpenSecret returns the signing secret from its stored form.
func OpenSecret(stored []byte, secretKey string) (string, error) {
	if !bytes.HasPrefix(stored, []byte(sealedPrefix)) {
		return string(stored), nil
	}
	if secretKey == "" {
		return "", ErrSecretKey
	}
	plain, err := seal.Open(stored, len(sealedPrefix), secretKey, hkdfInfo)
	if errors.Is(err, seal.ErrOpen) || errors.Is(err, seal.ErrTruncated) {
		return "", ErrSecretKey
	}
	if err != nil {
		return "", fmt.Errorf("webhook: %w", err)
	}
	return string(plain), nil
}
