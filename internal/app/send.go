package app

import (
	"context"
	"errors"
	"net/mail"
	"sort"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/message"
	"github.com/sendonce/sendonce/internal/tracing"
)

// Limits on a send request. They keep one request's work bounded.
const (
	MaxRecipients = 50 // per field: to, cc, bcc, reply_to
	MaxTags       = 50
	MaxTagLen     = 256
	MaxHeaders    = 50
	MaxSubjectLen = 998 // one RFC 5322 line, before encoding
)

// SendRequest is a send as a caller asks for it.
type SendRequest struct {
	To, Cc, Bcc, ReplyTo []string
	From                 string
	MailboxID            string
	Subject, Text, HTML  string
	TemplateID           string
	Variables            map[string]any
	Headers              map[string]string
	Tags                 map[string]string
	// InReplyTo, References and Forward make a reply or a forward (the
	// compatibility routes; see compat.go).
	InReplyTo  string
	References []string
	Forward    []byte
	// Attachments are the caller's files; ScheduledAt an RFC 3339 time to
	// send at ("" for now). See attach.go and schedule.go.
	Attachments []AttachmentRequest
	ScheduledAt string
	// Hold, when set, holds the send for a person's approval (status
	// pending_approval) even if its key does not require approval; it
	// says why (see agentmail.go). The agent's reply and forward routes
	// set it; a caller's request body cannot.
	Hold string
	// Stream is the send's stream, "" for its key's default (docs/api.md,
	// "Streams"); only the native route lets a caller name one.
	Stream string
	// Unsubscribe asks for the one-click unsubscribe headers on a send
	// that is not bulk (bulk sends carry them anyway); native route only.
	Unsubscribe bool
}

// Mailbox resolves a tenant's mailbox; the default one exists for every
// tenant even when nobody stored it.
// Every accept and every attempt resolves one: it is cached for
// MailboxCacheTTL.
func (s *Service) Mailbox(ctx context.Context, tenant, id string) (*core.Mailbox, error) {
	now := time.Now() // the cache's clock is the machine's, as the key cache's
	if m, ok := s.mailboxes.get(tenant+"\x00"+id, now); ok {
		return m, nil
	}
	gen := s.mailboxes.generation()
	m, err := s.store.Mailbox(ctx, tenant, id)
	if errors.Is(err, core.ErrNotFound) && id == core.DefaultMailboxID {
		m, err = &core.Mailbox{Tenant: tenant, ID: core.DefaultMailboxID, Address: s.cfg.DefaultFrom}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := s.OpenTransport(m); err != nil {
		return nil, err
	}
	s.mailboxes.put(tenant+"\x00"+id, m, now, gen)
	return m, nil
}

// PrepareSend validates a request for key and renders it into a send that is
// ready to be accepted. It writes nothing. The steps run in the order in
// which their errors are reported, so a request with several faults is
// always told the same one.
func (s *Service) PrepareSend(ctx context.Context, key *core.APIKey, idemKey string, r *SendRequest) (*core.Send, error) {
	if err := checkAgentRequest(key, r); err != nil {
		return nil, err
	}
	mailboxID := r.MailboxID
	if mailboxID == "" {
		mailboxID = core.DefaultMailboxID
	}
	mb, err := s.sendingMailbox(ctx, key, mailboxID)
	if err != nil {
		return nil, err
	}
	stream, err := sendStream(key, r.Stream)
	if err != nil {
		return nil, err
	}
	send := &core.Send{
		Tenant: key.Tenant, IdempotencyKey: idemKey, MailboxID: mailboxID, TemplateID: r.TemplateID, Stream: stream,
		Unsubscribe: r.Unsubscribe,
	}
	if err := setRecipients(send, r); err != nil {
		return nil, err
	}
	if err := checkAllowlist(key, send); err != nil {
		return nil, err
	}
	if send.From, err = fromAddress(key, mb, r.From); err != nil {
		return nil, err
	}
	if err := s.checkVerifiedFrom(ctx, key.Tenant, send.From); err != nil {
		return nil, err
	}
	if send.Subject, send.Text, send.HTML, err = s.content(ctx, key.Tenant, r); err != nil {
		return nil, err
	}
	if send.Headers, err = sendHeaders(r.Headers); err != nil {
		return nil, err
	}
	if key.Agent {
		send.Headers = append(send.Headers, agentMark(key))
	}
	if err := checkUnsubscribe(send, hasUnsubscribeHeader(send.Headers)); err != nil {
		return nil, err
	}
	if err := checkTags(r.Tags); err != nil {
		return nil, err
	}
	send.Tags = r.Tags
	if err := applyThread(send, r); err != nil {
		return nil, err
	}
	if r.ScheduledAt != "" {
		at, err := ParseSchedule("scheduled_at", r.ScheduledAt, s.Now())
		if err != nil {
			return nil, err
		}
		send.ScheduledAt = &at
	}
	if send.Attachments, err = s.prepareAttachments(ctx, r.Attachments, send.Text, send.HTML); err != nil {
		return nil, err
	}
	if send.Tags == nil {
		send.Tags = map[string]string{}
	}
	send.HoldReason = r.Hold
	return send, nil
}

// sendStream is a send's stream: the one asked for, else its key's
// default, else transactional.
func sendStream(key *core.APIKey, asked string) (core.Stream, error) {
	st := core.Stream(asked)
	if st != "" && !st.Valid() {
		return "", core.Errorf(core.CodeValidation, "stream", "stream must be transactional or bulk")
	}
	return st.Or(key.DefaultStream).Or(core.StreamTransactional), nil
}

// sendingMailbox is the mailbox a send goes out from, if key may use it
// and it may send.
func (s *Service) sendingMailbox(ctx context.Context, key *core.APIKey, id string) (*core.Mailbox, error) {
	if !key.MayUseMailbox(id) {
		return nil, core.Errorf(core.CodeForbidden, "mailbox_id", "this API key may not send from mailbox %q", id)
	}
	mb, err := s.Mailbox(ctx, key.Tenant, id)
	if errors.Is(err, core.ErrNotFound) {
		return nil, core.Errorf(core.CodeValidation, "mailbox_id", "mailbox %q does not exist", id)
	}
	if err != nil {
		return nil, err
	}
	if mb.ReceiveOnly {
		return nil, core.Errorf(core.CodeValidation, "mailbox_id", "mailbox %q is receive-only", id)
	}
	return mb, nil
}

// setRecipients parses r's address lists into send, each in its stored
// form; only to is required.
func setRecipients(send *core.Send, r *SendRequest) error {
	var err error
	if send.To, err = addressList("to", r.To, true); err != nil {
		return err
	}
	if send.Cc, err = addressList("cc", r.Cc, false); err != nil {
		return err
	}
	if send.Bcc, err = addressList("bcc", r.Bcc, false); err != nil {
		return err
	}
	send.ReplyTo, err = addressList("reply_to", r.ReplyTo, false)
	return err
}

// fromAddress is the From of a send from mailbox mb: raw, or when that is
// empty the mailbox's own address and name.
func fromAddress(key *core.APIKey, mb *core.Mailbox, raw string) (string, error) {
	if raw == "" {
		raw = FormatAddress(&mail.Address{Name: mb.Name, Address: mb.Address})
	}
	a, err := parseAddress("from", raw)
	if err != nil {
		return "", err
	}
	// A key limited to mailboxes sends only from those (docs/api.md,
	// "Authentication and scopes"): the mailbox's address, under any display name.
	if len(key.Mailboxes) > 0 && !strings.EqualFold(a.Address, mb.Address) {
		return "", core.Errorf(core.CodeForbidden, "from", "this API key may send only as its mailbox's address %s", mb.Address)
	}
	return FormatAddress(a), nil
}

// content is the subject and bodies of a send: r's own, or its template
// rendered with r's variables.
func (s *Service) content(ctx context.Context, tenant string, r *SendRequest) (subject, text, html string, err error) {
	if err := checkContentSource(r); err != nil {
		return "", "", "", err
	}
	subject, text, html = r.Subject, r.Text, r.HTML
	if r.TemplateID != "" {
		t, err := s.store.Template(ctx, tenant, r.TemplateID)
		if errors.Is(err, core.ErrNotFound) {
			return "", "", "", core.Errorf(core.CodeValidation, "template_id", "template %q does not exist", r.TemplateID)
		}
		if err != nil {
			return "", "", "", err
		}
		if subject, text, html, err = RenderTemplate(t, r.Variables); err != nil {
			return "", "", "", err
		}
	}
	if err := checkContent(subject, text, html); err != nil {
		return "", "", "", err
	}
	return subject, text, html, nil
}

// checkContentSource says whether r names its content one way: a template
// (with variables) or subject, text and html of its own.
func checkContentSource(r *SendRequest) error {
	if r.TemplateID != "" {
		if r.Subject != "" || r.Text != "" || r.HTML != "" {
			return core.Errorf(core.CodeValidation, "template_id", "give either template_id or subject/text/html, not both")
		}
		return nil
	}
	if r.Variables != nil {
		return core.Errorf(core.CodeValidation, "variables", "variables need a template_id")
	}
	return nil
}

// checkContent checks a send's subject and bodies, given or rendered.
func checkContent(subject, text, html string) error {
	if strings.TrimSpace(subject) == "" {
		return core.Errorf(core.CodeValidation, "subject", "subject is required")
	}
	if message.HasLineBreak(subject) {
		return core.Errorf(core.CodeValidation, "subject", "subject must not contain CR or LF")
	}
	if len(subject) > MaxSubjectLen {
		return core.Errorf(core.CodeValidation, "subject", "subject is longer than %d bytes", MaxSubjectLen)
	}
	if text == "" && html == "" {
		return core.Errorf(core.CodeValidation, "text", "text or html is required")
	}
	return nil
}

// sendHeaders checks a request's extra headers and returns them sorted by
// name: a map has no order, and the message must be the same on every
// attempt. None gives nil.
func sendHeaders(h map[string]string) ([]core.Header, error) {
	if len(h) > MaxHeaders {
		return nil, core.Errorf(core.CodeValidation, "headers", "at most %d headers", MaxHeaders)
	}
	names := make([]string, 0, len(h))
	for n := range h {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []core.Header
	for _, n := range names {
		if err := message.CheckHeader(n, h[n]); err != nil {
			return nil, core.Errorf(core.CodeValidation, "headers", "header %q: %v", n, err)
		}
		if reservedHeader(n) {
			return nil, core.Errorf(core.CodeValidation, "headers", "header %q is set by the server (on an agent key's mail)", n)
		}
		out = append(out, core.Header{Name: n, Value: h[n]})
	}
	return out, nil
}

func checkTags(tags map[string]string) error {
	if len(tags) > MaxTags {
		return core.Errorf(core.CodeValidation, "tags", "at most %d tags", MaxTags)
	}
	for k, v := range tags {
		if k == "" || len(k) > MaxTagLen || len(v) > MaxTagLen {
			return core.Errorf(core.CodeValidation, "tags", "tag names must be 1 to %d bytes, values at most %d", MaxTagLen, MaxTagLen)
		}
	}
	return nil
}

func parseAddress(param, raw string) (*mail.Address, error) {
	if message.HasLineBreak(raw) {
		return nil, core.Errorf(core.CodeValidation, param, "address must not contain CR or LF")
	}
	a, err := mail.ParseAddress(raw)
	if err != nil {
		return nil, core.Errorf(core.CodeValidation, param, "invalid address %q", raw)
	}
	return a, nil
}

func addressList(param string, raw []string, required bool) ([]string, error) {
	if required && len(raw) == 0 {
		return nil, core.Errorf(core.CodeValidation, param, "at least one recipient is required")
	}
	if len(raw) > MaxRecipients {
		return nil, core.Errorf(core.CodeValidation, param, "at most %d addresses", MaxRecipients)
	}
	out := make([]string, 0, len(raw))
	for _, r := range raw {
		a, err := parseAddress(param, r)
		if err != nil {
			return nil, err
		}
		out = append(out, FormatAddress(a))
	}
	return out, nil
}

// FormatAddress renders an address for people and for storage: the bare
// address, or the display name in quotes, unencoded (net/mail parses UTF-8
// names back; RFC 2047 encoding happens only when the message is built).
func FormatAddress(a *mail.Address) string {
	if a.Name == "" {
		return a.Address
	}
	name := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(a.Name)
	return `"` + name + `" <` + a.Address + `>`
}

// acceptSend is AcceptSend inside its span (ctx has it).
func (s *Service) acceptSend(ctx context.Context, tx core.Tx, key *core.APIKey, send *core.Send) error {
	now := s.Now()
	if err := s.checkCaps(ctx, tx, key, now); err != nil {
		return err
	}
	send.ID = NewID("snd_")
	send.MessageID = send.RawMessageID // a submitted message keeps its own
	if send.MessageID == "" {
		send.MessageID = message.NewMessageID(send.ID, addrOf(send.From))
	}
	send.CreatedAt, send.UpdatedAt = now, now
	send.Status = core.StatusQueued
	if send.ScheduledAt != nil {
		send.Status, send.NextAttemptAt = core.StatusScheduled, send.ScheduledAt
	}
	if key.RequiresApproval || send.HoldReason != "" {
		send.Status, send.NextAttemptAt = core.StatusPendingApproval, nil
	}
	send.TraceParent = "" // never one a caller set
	if s.tracer.Enabled() {
		send.TraceParent = tracing.TraceParent(ctx) // the attempts' parent, in the same insert
	}
	if err := tx.InsertSend(ctx, send); err != nil {
		return err
	}
	if send.InReplyTo != "" {
		if err := joinThread(ctx, tx, send); err != nil {
			return err
		}
	}
	if tracksKey(key) {
		if err := tx.SetSendAPIKey(ctx, send.ID, key.ID); err != nil {
			return err
		}
	}
	if send.Status != core.StatusQueued {
		// Rare enough to keep the explicit row, which says what it waits for.
		detail := string(send.Status)
		if send.HoldReason != "" {
			detail += ": " + send.HoldReason
		}
		events := []core.Event{{Type: core.EventAccepted, At: now, Detail: detail}}
		if send.Status == core.StatusScheduled {
			events = append(events, core.Event{Type: core.EventScheduled, At: now, Detail: send.ScheduledAt.Format(time.RFC3339)})
		}
		return tx.AddEvent(ctx, send.ID, events...)
	}
	return nil
}

func addrOf(rendered string) string {
	a, err := mail.ParseAddress(rendered)
	if err != nil {
		return ""
	}
	return a.Address
}
