package app

import (
	"context"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/inmail"
)

// Send modes of POST /api/public/v1/mailboxes/{id}/send.
const (
	ModeSend    = "send"
	ModeReply   = "reply"
	ModeForward = "forward"
)

// Limits on threading and forwarding.
const (
	MaxReferences = 50
	// MaxForwardBytes bounds the original a forward attaches: as large as a
	// request body may be, so that a small forward request stores no more
	// than a send could have carried (a chain of forwards grew the stored
	// message by a third each time).
	MaxForwardBytes = 1 << 20
)

// NormalizeMsgID returns id with angle brackets (a caller may leave them
// out), or ok false when it is no msg-id: id-left "@" id-right, printable
// ASCII without spaces, brackets or a second "@".
func NormalizeMsgID(id string) (string, bool) {
	id = strings.TrimSpace(id)
	if strings.HasPrefix(id, "<") && strings.HasSuffix(id, ">") {
		id = id[1 : len(id)-1]
	}
	left, right, ok := strings.Cut(id, "@")
	if !ok || left == "" || right == "" || len(id) > 900 || strings.Contains(right, "@") {
		return "", false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == '<' || c == '>' {
			return "", false
		}
	}
	return "<" + id + ">", true
}

// ReplySubject prefixes "Re: " unless the subject already starts with one.
func ReplySubject(subject string) string {
	subject = inmail.FoldControls(subject)
	if hasPrefixFold(subject, "re:") {
		return subject
	}
	return "Re: " + subject
}

// ForwardSubject prefixes "Fwd: " unless the subject already starts with
// "Fwd:" or "Fw:".
func ForwardSubject(subject string) string {
	subject = inmail.FoldControls(subject)
	if hasPrefixFold(subject, "fwd:") || hasPrefixFold(subject, "fw:") {
		return subject
	}
	return "Fwd: " + subject
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// applyThread validates and copies the reply and forward fields of r.
func applyThread(send *core.Send, r *SendRequest) error {
	if r.InReplyTo != "" {
		id, ok := NormalizeMsgID(r.InReplyTo)
		if !ok {
			return core.Errorf(core.CodeValidation, "in_reply_to", "in_reply_to must be a Message-ID such as <abc@example.com>")
		}
		send.InReplyTo = id
	}
	if len(r.References) > MaxReferences {
		return core.Errorf(core.CodeValidation, "references", "at most %d references", MaxReferences)
	}
	for _, ref := range r.References {
		id, ok := NormalizeMsgID(ref)
		if !ok {
			return core.Errorf(core.CodeValidation, "references", "references must be Message-IDs such as <abc@example.com>")
		}
		send.References = append(send.References, id)
	}
	if len(r.Forward) > MaxForwardBytes {
		return core.Errorf(core.CodeValidation, "original_id", "the original message is larger than %d bytes", MaxForwardBytes)
	}
	send.Forward = r.Forward
	return nil
}

// MailboxForAddress returns the id of the tenant's mailbox whose address is
// addr (case-insensitive), or the default mailbox's when none is: the Resend
// routes pick the sending identity by the From address.
func (s *Service) MailboxForAddress(ctx context.Context, tenant, addr string) (string, error) {
	ms, err := s.store.ListMailboxes(ctx, tenant)
	if err != nil {
		return "", err
	}
	for _, m := range ms {
		if strings.EqualFold(m.Address, addr) {
			return m.ID, nil
		}
	}
	return core.DefaultMailboxID, nil
}
