package webhook

import (
	"bytes"
	"errors"
	"testing"
)

func TestSealSecret(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	key := "0123456789abcdef0123456789abcdef-server"
	sealed, err := SealSecret(secret, key)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("MfKQ9r8G")) {
		t.Fatalf("sealed form shows the secret: %q", sealed)
	}
	if got, err := OpenSecret(sealed, key); err != nil || got != secret {
		t.Errorf("OpenSecret = %q, %v", got, err)
	}
	if _, err := OpenSecret(sealed, key+"x"); !errors.Is(err, ErrSecretKey) {
		t.Errorf("another key: %v, want ErrSecretKey", err)
	}
	if _, err := OpenSecret(sealed, ""); !errors.Is(err, ErrSecretKey) {
		t.Errorf("no key: %v, want ErrSecretKey", err)
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := OpenSecret(sealed, key); !errors.Is(err, ErrSecretKey) {
		t.Errorf("altered: %v, want ErrSecretKey", err)
	}
	plain, _ := SealSecret(secret, "")
	if got, err := OpenSecret(plain, key); err != nil || got != secret {
		t.Errorf("a secret stored before SENDONCE_SECRET_KEY was set: %q, %v", got, err)
	}
}
