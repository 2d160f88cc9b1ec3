package webhook

import (
	"errors"

	"github.com/sendonce/sendonce/internal/seal"
)

// A signing secret must be usable to sign, so it cannot be kept as a hash
// (as API keys are). With SENDONCE_SECRET_KEY set it is sealed (package
// seal: AES-256-GCM under a key derived with HKDF-SHA256 from that secret
// and a random salt, as DKIM keys are); without, it is kept as its whsec_
// text, and the database must be protected like the secret itself
// (docs/security.md).

// ErrSecretKey says a sealed signing secret cannot be opened: no
// SENDONCE_SECRET_KEY, or another one than it was sealed with.
var ErrSecretKey = errors.New("webhook: the signing secret is sealed and SENDONCE_SECRET_KEY does not open it")

var secretField = seal.Field{Name: "webhook", Info: "sendonce webhook signing secret v1", ErrKey: ErrSecretKey}

// SealSecret returns the stored form of a signing secret: sealed under
// secretKey, or the secret itself when secretKey is empty.
func SealSecret(secret, secretKey string) ([]byte, error) { return secretField.Seal(secret, secretKey) }

// OpenSecret returns the signing secret from its stored form.
func OpenSecret(stored []byte, secretKey string) (string, error) {
	return secretField.Open(stored, secretKey)
}
