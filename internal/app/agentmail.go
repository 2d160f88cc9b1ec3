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

// Hold reasons, fixed sentences: they are written to the send's history
// and shown to the person who approves.
const (
	HoldReasonOutsideThread = "a recipient is not a participant of the thread replied to"
	HoldReasonForward       = "a forward needs approval unless the key's recipient allowlist covers every recipient"
)

// Guarded says whether a reply or forward gets the agent rules: it is made
// with an agent key, or asked for by an agent (the MCP server says so; a
// caller can only add the rules by saying it, never remove them).
func Guarded(key *core.APIKey, agentAsked bool) bool { return key.Agent || agentAsked }

// HoldOutsideThread holds r, a reply to m, for a person's approval when a
// recipient is not a participant of m's thread (ThreadParticipants).
func (s *Service) HoldOutsideThread(ctx context.Context, key *core.APIKey, m *core.ReceivedMessage, r *SendRequest) error {
	parts, err := s.ThreadParticipants(ctx, key, m)
	if err != nil {
		return err
	}
	if len(outsiders(parts, r.To, r.Cc, r.Bcc)) > 0 {
		r.Hold = HoldReasonOutsideThread
	}
	return nil
}

// HoldForward holds r, a forward, unless the key has a recipient allowlist
// that covers every recipient (a key with one that does not is refused by
// PrepareSend, as any send).
func HoldForward(key *core.APIKey, r *SendRequest) {
	if !allAllowed(key.AllowRecipients, r.To, r.Cc, r.Bcc) {
		r.Hold = HoldReasonForward
	}
}

// PrepareReply prepares r as the reply to the received message id
// (ReplyRequest fills what r leaves out); guarded, a recipient outside the
// thread holds it. It then goes through PrepareSend (the key's allowlist
// and agent rules refuse first) and, accepted, the idempotency engine as
// any send.
//
// It is the one reply use case of every door (the native route, Resend's
// thread route, the dashboard, and MCP through the native route): the
// same scopes (send to send, read to see what is answered), the same
// fields and the same guard.
func (s *Service) PrepareReply(ctx context.Context, key *core.APIKey, idemKey, id string, replyAll, guarded bool, r *SendRequest) (*core.Send, error) {
	if !key.Has(core.ScopeRead) {
		// A reply quotes nothing, but it answers a message the key could
		// not otherwise read: its sender, subject and thread.
		return nil, core.Errorf(core.CodeForbidden, "id", "replying needs an API key with the read scope")
	}
	m, err := s.ReplyRequest(ctx, key, id, replyAll, r)
	if err != nil {
		return nil, err
	}
	if guarded {
		if err := s.HoldOutsideThread(ctx, key, m, r); err != nil {
			return nil, err
		}
	}
	return s.PrepareSend(ctx, key, idemKey, r)
}

// PrepareForward, the one forward use case of every door, prepares r as
// the forward of the received message id:
// the original, as received, attached whole (message/rfc822), from the
// mailbox it arrived at unless r names one; subject "Fwd: …" and a fixed
// text unless r has its own. Guarded, it is held (HoldForward).
func (s *Service) PrepareForward(ctx context.Context, key *core.APIKey, idemKey, id string, guarded bool, r *SendRequest) (*core.Send, error) {
	if !key.Has(core.ScopeRead) {
		// Forwarding shows the original to whoever gets the forward.
		return nil, core.Errorf(core.CodeForbidden, "id", "forwarding needs an API key with the read scope")
	}
	if len(r.To) == 0 {
		return nil, core.Errorf(core.CodeValidation, "to", "a forward needs to")
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
		return nil, core.Errorf(core.CodeValidation, "id", "the message is larger than %d bytes, the most a forward may attach", MaxForwardBytes)
	}
	r.Forward = raw
	if r.MailboxID == "" {
		r.MailboxID = m.MailboxID
	}
	if r.Subject == "" && r.TemplateID == "" {
		r.Subject = ForwardSubject(m.Subject)
	}
	if strings.TrimSpace(r.Text) == "" && r.HTML == "" && r.TemplateID == "" {
		r.Text = "Forwarded message attached."
	}
	if guarded {
		HoldForward(key, r)
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
