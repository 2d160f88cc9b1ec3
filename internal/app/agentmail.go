package app

import (
	"context"
	"net/mail"
	"slices"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
)

// The reply and the forward of a received message, as an agent makes them
// (docs/agents.md, "Reading mail"). A received message is written by
// whoever sent it: an agent that reads it may be talked into mailing
// someone else ("forward all mail to …"). So what a reply may do without a
// person is narrowed to the conversation it answers, and a forward, which
// hands the whole original to a new reader, waits for a person unless the
// key's recipient allowlist already says who may get mail.

// ReplyParams is a reply to a received message. Recipients, subject and
// threading come from the message (ReplyRequest); To and Cc add to them.
type ReplyParams struct {
	ReplyAll   bool
	To, Cc     []string
	Text, HTML string
}

// Hold reasons, fixed sentences: they are written to the send's history
// and shown to the person who approves.
const (
	HoldOutsideThread = "a recipient is not a participant of the thread replied to"
	HoldForward       = "a forward needs approval unless the key's recipient allowlist covers every recipient"
)

// PrepareReply prepares the reply to the received message id. A recipient
// who is not a participant of the message's thread holds the send for a
// person's approval: the reply still goes through PrepareSend (the key's
// allowlist and agent rules refuse first) and, once accepted, through the
// same idempotency engine as any send.
func (s *Service) PrepareReply(ctx context.Context, key *core.APIKey, idemKey, id string, p ReplyParams) (*core.Send, error) {
	r := &SendRequest{Text: p.Text, HTML: p.HTML}
	m, err := s.ReplyRequest(ctx, key, id, p.ReplyAll, r)
	if err != nil {
		return nil, err
	}
	r.To = appendMissing(r.To, p.To, nil)
	r.Cc = appendMissing(r.Cc, p.Cc, r.To)
	parts, err := s.ThreadParticipants(ctx, key, m)
	if err != nil {
		return nil, err
	}
	if len(outsiders(parts, r.To, r.Cc)) > 0 {
		r.Hold = HoldOutsideThread
	}
	return s.PrepareSend(ctx, key, idemKey, r)
}

// ForwardParams is a forward of a received message to To and Cc, with a
// note of the forwarder's own as its text.
type ForwardParams struct {
	To, Cc []string
	Note   string
}

// PrepareForward prepares the forward of the received message id: the
// original, as received, attached whole (message/rfc822), from the mailbox
// it arrived at. It is held for approval unless the key has a recipient
// allowlist that covers every recipient (a key with one that does not is
// refused by PrepareSend, as any send).
func (s *Service) PrepareForward(ctx context.Context, key *core.APIKey, idemKey, id string, p ForwardParams) (*core.Send, error) {
	if !key.Has(core.ScopeRead) {
		// Forwarding shows the original to whoever gets the forward.
		return nil, core.Errorf(core.CodeForbidden, "message_id", "forwarding needs an API key with the read scope")
	}
	m, err := s.ReceivedMessage(ctx, key, id)
	if err != nil {
		return nil, err
	}
	raw, err := s.store.ReceivedRaw(ctx, key.Tenant, id)
	if err != nil {
		return nil, err
	}
	if len(raw) > MaxForwardBytes {
		return nil, core.Errorf(core.CodeValidation, "message_id", "the message is larger than %d bytes, the most a forward may attach", MaxForwardBytes)
	}
	text := p.Note
	if strings.TrimSpace(text) == "" {
		text = "Forwarded message attached."
	}
	r := &SendRequest{To: p.To, Cc: p.Cc, MailboxID: m.MailboxID, Subject: ForwardSubject(m.Subject), Text: text, Forward: raw}
	if !allAllowed(key.AllowRecipients, r.To, r.Cc) {
		r.Hold = HoldForward
	}
	return s.PrepareSend(ctx, key, idemKey, r)
}

// outsiders are the addresses of lists that are not among parts (bare,
// lower case); an address that does not parse is an outsider.
func outsiders(parts []string, lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, a := range l {
			if n := bareAddress(a); n == "" || !slices.Contains(parts, n) {
				out = append(out, a)
			}
		}
	}
	return out
}

// allAllowed reports whether allow is set and covers every address.
func allAllowed(allow []string, lists ...[]string) bool {
	if len(allow) == 0 {
		return false
	}
	for _, l := range lists {
		for _, raw := range l {
			a, err := mail.ParseAddress(raw)
			if err != nil || !RecipientAllowed(allow, a.Address) {
				return false
			}
		}
	}
	return true
}

// appendMissing is list with the addresses of more that neither it nor
// elsewhere has (by bare address), in order: an address is mailed once.
func appendMissing(list, more, elsewhere []string) []string {
	out := slices.Clone(list)
	for _, a := range more {
		n := bareAddress(a)
		has := func(b string) bool { return bareAddress(b) == n }
		if n != "" && (slices.ContainsFunc(out, has) || slices.ContainsFunc(elsewhere, has)) {
			continue
		}
		out = append(out, a)
	}
	return out
}
