package delivery

import (
	"fmt"
	"net/mail"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/message"
	"github.com/sendonce/sendonce/internal/transport"
)

// renderRaw is Render for a send that carries the client's own message
// (SMTP submission): the message goes out as the client wrote it, with
// Message-ID and Date added when it had none; the envelope is the send's
// From address and its recipients, which for a submitted message are the
// client's RCPT TO addresses.
func renderRaw(s *core.Send) ([]byte, transport.Envelope, error) {
	from, err := mail.ParseAddress(s.From)
	if err != nil {
		return nil, transport.Envelope{}, fmt.Errorf("from: %w", err)
	}
	var rcpt []string
	for _, list := range [][]string{s.To, s.Cc, s.Bcc} {
		for _, r := range list {
			a, err := mail.ParseAddress(r)
			if err != nil {
				return nil, transport.Envelope{}, fmt.Errorf("address %q: %w", r, err)
			}
			rcpt = append(rcpt, a.Address)
		}
	}
	raw, err := message.CompleteRaw(s.Raw, s.MessageID, s.CreatedAt)
	if err != nil {
		return nil, transport.Envelope{}, err
	}
	return raw, transport.Envelope{From: from.Address, To: rcpt}, nil
}
