// Package render turns a stored send into the message that goes out and
// its envelope: the one place where a send's fields become bytes, used by
// delivery for every attempt and by the API and the dashboard to show or
// forward a send exactly as it is (or was) delivered.
package render

import (
	"bytes"
	"fmt"
	"net/mail"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/message"
	"github.com/sendonce/sendonce/internal/transport"
)

// Message builds the message and its envelope from a stored send. It is
// deterministic: every attempt of one send renders the same bytes (the
// DKIM signature, when there is one, is added afterwards).
func Message(s *core.Send) ([]byte, transport.Envelope, error) {
	env, err := Envelope(s)
	if err != nil {
		return nil, transport.Envelope{}, err
	}
	if s.Raw != nil {
		raw, err := message.CompleteRaw(s.Raw, s.MessageID, s.CreatedAt)
		if err != nil {
			return nil, transport.Envelope{}, err
		}
		return raw, env, nil
	}
	from, err := mail.ParseAddress(s.From)
	if err != nil {
		return nil, transport.Envelope{}, fmt.Errorf("from: %w", err)
	}
	parse := func(list []string) ([]mail.Address, error) {
		var as []mail.Address
		for _, r := range list {
			a, err := mail.ParseAddress(r)
			if err != nil {
				return nil, fmt.Errorf("address %q: %w", r, err)
			}
			as = append(as, *a)
		}
		return as, nil
	}
	to, err := parse(s.To)
	if err != nil {
		return nil, transport.Envelope{}, err
	}
	cc, err := parse(s.Cc)
	if err != nil {
		return nil, transport.Envelope{}, err
	}
	replyTo, err := parse(s.ReplyTo)
	if err != nil {
		return nil, transport.Envelope{}, err
	}
	m := &message.Message{
		From: *from, To: to, Cc: cc, ReplyTo: replyTo, Subject: s.Subject, Text: s.Text, HTML: s.HTML,
		MessageID: s.MessageID, Date: s.CreatedAt, InReplyTo: s.InReplyTo, References: s.References,
	}
	for _, h := range s.Headers {
		m.Headers = append(m.Headers, message.Header{Name: h.Name, Value: h.Value})
	}
	var atts []message.Attachment
	if len(s.Forward) > 0 {
		atts = append(atts, message.Attachment{ContentType: "message/rfc822", Filename: "forwarded.eml", Data: s.Forward})
	}
	for _, a := range s.Attachments {
		atts = append(atts, message.Attachment{ContentType: a.ContentType, Filename: a.Filename, ContentID: a.ContentID, Data: a.Data})
	}
	raw, err := message.BuildWithAttachments(m, atts)
	if err != nil {
		return nil, transport.Envelope{}, err
	}
	return raw, env, nil
}

// Envelope is the envelope Message gives s, without rendering the
// message: the send's From address, and its recipients (to, cc and bcc,
// in that order). For a submitted message (SMTP submission) these are the
// client's MAIL FROM and RCPT TO addresses. Delivery says it to a relay
// ahead of the message while the attempt's claim commits.
func Envelope(s *core.Send) (transport.Envelope, error) {
	from, err := mail.ParseAddress(s.From)
	if err != nil {
		return transport.Envelope{}, fmt.Errorf("from: %w", err)
	}
	var rcpt []string
	for _, list := range [][]string{s.To, s.Cc, s.Bcc} {
		for _, r := range list {
			a, err := mail.ParseAddress(r)
			if err != nil {
				return transport.Envelope{}, fmt.Errorf("address %q: %w", r, err)
			}
			rcpt = append(rcpt, a.Address)
		}
	}
	return transport.Envelope{From: from.Address, To: rcpt}, nil
}

// PrependHeaders returns raw with header fields added at the top (what a
// copy for one recipient carries besides the send's own, such as its
// one-click unsubscribe headers). A value with ", " between list items is
// folded there, so that each line stays short. The values are sendonce's
// own: they are not checked.
func PrependHeaders(raw []byte, h []core.Header) []byte {
	var b bytes.Buffer
	b.Grow(len(raw) + 256)
	for _, f := range h {
		b.WriteString(f.Name)
		b.WriteString(": ")
		b.WriteString(strings.ReplaceAll(f.Value, ">, <", ">,\r\n <"))
		b.WriteString("\r\n")
	}
	b.Write(raw)
	return b.Bytes()
}
