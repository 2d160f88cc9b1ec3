package seal

import (
	"bytes"
	"errors"
	"fmt"
)

// fieldPrefix marks a sealed text field; a stored field without it was
// kept as given (no SENDONCE_SECRET_KEY when it was written).
const fieldPrefix = "sealed-v1:"

// Field is one kind of secret text kept in a database column: sealed
// under SENDONCE_SECRET_KEY when one is set, as itself otherwise (the
// database must then be protected like the secret).
type Field struct {
	// Name prefixes errors ("imapurl", "webhook").
	Name string
	// Info keeps one kind of field from being opened as another (Seal).
	Info string
	// ErrKey is what Open returns when the field is sealed and the secret
	// key cannot open it: none set, or another one than it was sealed with.
	ErrKey error
}

// Seal returns the stored form of text.
func (f Field) Seal(text, secretKey string) ([]byte, error) {
	if secretKey == "" {
		return []byte(text), nil
	}
	b, err := Seal([]byte(fieldPrefix), secretKey, f.Info, []byte(text))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	return b, nil
}

// Open returns the text from its stored form.
func (f Field) Open(stored []byte, secretKey string) (string, error) {
	if !bytes.HasPrefix(stored, []byte(fieldPrefix)) {
		return string(stored), nil
	}
	if secretKey == "" {
		return "", f.ErrKey
	}
	plain, err := Open(stored, len(fieldPrefix), secretKey, f.Info)
	if errors.Is(err, ErrOpen) || errors.Is(err, ErrTruncated) {
		return "", f.ErrKey
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", f.Name, err)
	}
	return string(plain), nil
}
