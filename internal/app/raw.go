package app

import (
	"context"
	"errors"
	"mime"
	"net/mail"
	nettextproto "net/textproto"
	"strings"

	"github.com/emersion/go-message/textproto"
	"github.com/sendonce/sendonce/internal/core"
)

// A submitted message (SMTP, docs/smtp.md) is the client's own MIME: it keeps
// its header fields and parts, and the same rules as a JSON send apply to
// what it asks for — the key's mailboxes, the agent guardrails, the
// recipient allowlist, the caps (in AcceptSend).

// SubmissionMailbox is the mailbox a submission whose MAIL FROM is
// mailFrom sends from. A key limited to mailboxes may use only their
// addresses (forbidden otherwise); any other key sends from the default
// mailbox, as a JSON send without mailbox_id does.
func (s *Service) SubmissionMailbox(ctx context.Context, key *core.APIKey, mailFrom string) (string, error) {
	if len(key.Mailboxes) == 0 {
		return core.DefaultMailboxID, nil
	}
	for _, id := range key.Mailboxes {
		mb, err := s.Mailbox(ctx, key.Tenant, id)
		if errors.Is(err, core.ErrNotFound) {
			continue
		}
		if err != nil {
			return "", err
		}
		if strings.EqualFold(mb.Address, mailFrom) {
			return id, nil
		}
	}
	return "", core.Errorf(core.CodeForbidden, "mail_from", "this API key may send only from its mailboxes' addresses, not %s", mailFrom)
}

// agentHeaders are the fields an agent key's submitted message may carry:
// those a JSON send of an agent renders too. Anything else is an extra
// header, which agent keys may not set.
var agentHeaders = map[string]bool{
	"From": true, "To": true, "Cc": true, "Reply-To": true, "Subject": true, "Date": true, "Message-Id": true,
	"In-Reply-To": true, "References": true, "Mime-Version": true, "Content-Type": true,
	"Content-Transfer-Encoding": true, "Content-Disposition": true, "Content-Id": true, "Content-Language": true,
}

// RawSubmission is a submitted message as the SMTP door parsed it, once.
type RawSubmission struct {
	IdemKey, MailboxID string
	// Rcpt are the envelope recipients.
	Rcpt []string
	// Header is Msg's header, parsed; Msg is what will be delivered (the
	// idempotency key header already removed).
	Header textproto.Header
	Msg    []byte
}

// PrepareRawSend validates a submitted message for key and makes it a send
// ready to be accepted. It writes nothing.
func (s *Service) PrepareRawSend(ctx context.Context, key *core.APIKey, sub RawSubmission) (*core.Send, error) {
	h, mailboxID, rcpt, msg, idemKey := sub.Header, sub.MailboxID, sub.Rcpt, sub.Msg, sub.IdemKey
	mb, err := s.Mailbox(ctx, key.Tenant, mailboxID)
	if err != nil {
		return nil, err
	}
	if mb.ReceiveOnly {
		return nil, core.Errorf(core.CodeValidation, "mailbox_id", "mailbox %q is receive-only", mailboxID)
	}
	from, err := headerFrom(h)
	if err != nil {
		return nil, err
	}
	send := &core.Send{Stream: key.DefaultStream.Or(core.StreamTransactional), Tenant: key.Tenant, IdempotencyKey: idemKey, MailboxID: mailboxID, From: FormatAddress(from),
		Raw: msg, RawMessageID: strings.TrimSpace(h.Get("Message-Id")), Tags: map[string]string{}}
	if send.To, err = addressList("to", rcpt, true); err != nil {
		return nil, err
	}
	if err := checkAllowlist(key, send); err != nil {
		return nil, err
	}
	if err := checkUnsubscribe(send, h.Has("List-Unsubscribe") || h.Has("List-Unsubscribe-Post")); err != nil {
		return nil, err
	}
	// A key limited to mailboxes, and an agent key, send only as the
	// mailbox's address (docs/api.md, "Authentication and scopes"; docs/agents.md).
	if (len(key.Mailboxes) > 0 || key.Agent) && !strings.EqualFold(from.Address, mb.Address) {
		return nil, core.Errorf(core.CodeForbidden, "from", "this API key may send only as its mailbox's address %s", mb.Address)
	}
	if err := s.checkVerifiedFrom(ctx, key.Tenant, send.From); err != nil {
		return nil, err
	}
	if key.Agent {
		if err := checkAgentMessage(h, send.To); err != nil {
			return nil, err
		}
		send.Raw = markRaw(key, send.Raw)
	}
	send.Subject = decodeSubject(h.Get("Subject"))
	return send, nil
}

// headerFrom is the message's one From address.
func headerFrom(h textproto.Header) (*mail.Address, error) {
	vals := h.Values("From")
	if len(vals) != 1 {
		return nil, core.Errorf(core.CodeValidation, "from", "the message needs exactly one From header")
	}
	list, err := mail.ParseAddressList(vals[0])
	if err != nil || len(list) != 1 {
		return nil, core.Errorf(core.CodeValidation, "from", "the message's From header is not one valid address")
	}
	return list[0], nil
}

// checkAgentMessage applies the agent guardrails to a submitted message:
// every recipient visible (no envelope-only, bcc, recipient) and no extra
// headers.
func checkAgentMessage(h textproto.Header, rcpt []string) error {
	for f := h.Fields(); f.Next(); {
		if !agentHeaders[nettextproto.CanonicalMIMEHeaderKey(f.Key())] {
			return core.Errorf(core.CodeForbidden, "headers", "agent keys may not set extra headers (%s)", f.Key())
		}
	}
	visible := map[string]bool{}
	for _, field := range []string{"To", "Cc"} {
		for _, v := range h.Values(field) {
			list, err := mail.ParseAddressList(v)
			if err != nil {
				return core.Errorf(core.CodeValidation, strings.ToLower(field), "the message's %s header is not a valid address list", field)
			}
			for _, a := range list {
				visible[strings.ToLower(a.Address)] = true
			}
		}
	}
	for _, r := range rcpt {
		if a := addrOf(r); !visible[strings.ToLower(a)] {
			return core.Errorf(core.CodeForbidden, "bcc", "agent keys may not set bcc: every recipient must be visible (%s is in no To or Cc)", a)
		}
	}
	return nil
}

// decodeSubject is the subject for people (the send's view, the audit
// log): RFC 2047 words decoded, what does not decode left as it is.
func decodeSubject(v string) string {
	d, err := new(mime.WordDecoder).DecodeHeader(v)
	if err != nil {
		return v
	}
	return d
}
