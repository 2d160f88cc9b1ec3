package seal

import (
	"bytes"
	"errors"
	"testing"
)

// TestSeal_OpensOnlyWithTheKeyAndInfoItWasSealedWith: a sealed value does
// not show its plaintext, opens with its own key and info, and fails with
// ErrOpen for another key, another info, or any altered byte of head,
// salt, nonce or ciphertext; a value too short is ErrTruncated.
func TestSeal_OpensOnlyWithTheKeyAndInfoItWasSealedWith(t *testing.T) {
	const key, info = "0123456789abcdef0123456789abcdef", "sendonce test v1"
	head, plain := []byte("head:"), []byte("the secret itself")
	sealed, err := Seal(head, key, info, plain)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(sealed, head) || bytes.Contains(sealed, plain) {
		t.Fatalf("sealed = %q: want the head first and no plaintext", sealed)
	}
	if len(sealed) != len(head)+saltSize+nonceSize+len(plain)+tagSize {
		t.Errorf("len = %d, want head, salt, nonce, ciphertext and tag", len(sealed))
	}
	if got, err := Open(sealed, len(head), key, info); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	again, _ := Seal(head, key, info, plain)
	if bytes.Equal(again, sealed) {
		t.Error("two seals of one value are equal: salt and nonce must be fresh")
	}
	for name, open := range map[string]func() ([]byte, error){
		"another key":  func() ([]byte, error) { return Open(sealed, len(head), key+"x", info) },
		"another info": func() ([]byte, error) { return Open(sealed, len(head), key, "sendonce other v1") },
	} {
		if _, err := open(); !errors.Is(err, ErrOpen) {
			t.Errorf("%s: %v, want ErrOpen", name, err)
		}
	}
	for i := range sealed {
		altered := bytes.Clone(sealed)
		altered[i] ^= 1
		if _, err := Open(altered, len(head), key, info); !errors.Is(err, ErrOpen) {
			t.Fatalf("byte %d altered: %v, want ErrOpen", i, err)
		}
	}
	if _, err := Open(sealed[:len(head)+saltSize+nonceSize+tagSize-1], len(head), key, info); !errors.Is(err, ErrTruncated) {
		t.Errorf("truncated: %v, want ErrTruncated", err)
	}
}
