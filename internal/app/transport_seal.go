package app

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/seal"
)

// A mailbox's transport URL carries a provider's credentials
// (ses://KEY:SECRET@…, resend://KEY@…, smtp://user:pass@…): it is kept
// sealed under SENDONCE_SECRET_KEY as imap URLs are, in base64 since the
// column is text. A row written before (or without a secret key) holds
// the URL as given and is read as it is. The URL is opened where a
// mailbox is read for use (Service.Mailbox) and never shown back: views
// show it redacted.

// ErrTransportKey: a mailbox's transport is sealed and the secret key
// cannot open it.
var ErrTransportKey = errors.New("app: the mailbox's transport is sealed and SENDONCE_SECRET_KEY does not open it")

var transportField = seal.Field{Name: "transport", Info: "sendonce mailbox transport url v1", ErrKey: ErrTransportKey}

// transportSealed marks a stored transport that is sealed (base64).
const transportSealed = "sealed-b64:"

// sealTransport returns the stored form of a transport URL.
func sealTransport(url, secretKey string) (string, error) {
	if url == "" || secretKey == "" {
		return url, nil
	}
	b, err := transportField.Seal(url, secretKey)
	if err != nil {
		return "", err
	}
	return transportSealed + base64.StdEncoding.EncodeToString(b), nil
}

// openTransport returns the URL from its stored form.
func openTransport(stored, secretKey string) (string, error) {
	rest, ok := strings.CutPrefix(stored, transportSealed)
	if !ok {
		return stored, nil
	}
	b, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return "", fmt.Errorf("transport: %w", err)
	}
	return transportField.Open(b, secretKey)
}

// OpenTransport replaces m's stored transport by its URL, for a mailbox
// read from the store directly (lists): views redact it.
func (s *Service) OpenTransport(m *core.Mailbox) error {
	url, err := openTransport(m.Transport, s.cfg.SecretKey)
	if err != nil {
		return err
	}
	m.Transport = url
	return nil
}
