package seal

import (
	"errors"
	"strings"
	"testing"
)

func TestField_SealedOnlyWithAKeyAndOpenedOnlyByIt(t *testing.T) {
	errKey := errors.New("no key")
	f := Field{Name: "t", Info: "info a", ErrKey: errKey}
	plain, err := f.Seal("secret", "")
	if err != nil || string(plain) != "secret" {
		t.Fatalf("without a key: %q %v, want the text as given", plain, err)
	}
	if got, err := f.Open(plain, "k1"); err != nil || got != "secret" {
		t.Fatalf("a field kept as given, opened with a key: %q %v", got, err)
	}
	sealed, err := f.Seal("secret", "k1")
	if err != nil || strings.Contains(string(sealed), "secret") || !strings.HasPrefix(string(sealed), fieldPrefix) {
		t.Fatalf("sealed: %q %v", sealed, err)
	}
	if got, err := f.Open(sealed, "k1"); err != nil || got != "secret" {
		t.Fatalf("open: %q %v", got, err)
	}
	other := Field{Name: "t", Info: "info b", ErrKey: errKey}
	for name, open := range map[string]func() (string, error){
		"no key":     func() (string, error) { return f.Open(sealed, "") },
		"other key":  func() (string, error) { return f.Open(sealed, "k2") },
		"other kind": func() (string, error) { return other.Open(sealed, "k1") },
		"truncated":  func() (string, error) { return f.Open(sealed[:len(fieldPrefix)+3], "k1") },
	} {
		if got, err := open(); !errors.Is(err, errKey) || got != "" {
			t.Errorf("%s: %q %v, want ErrKey", name, got, err)
		}
	}
}
