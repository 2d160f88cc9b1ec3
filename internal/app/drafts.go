package app

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sendonce/sendonce/internal/core"
)

// Drafts (docs/agents.md, "Drafts"): a new message or a reply kept unsent,
// which an agent writes and a person reads, edits and sends. Sending is
// one send whoever presses the button and however often: the draft's
// Idempotency-Key is fixed when it is created (DraftIdempotencyKey), every
// door sends it through idempotency.Run under that key, and the send
// records itself on the draft in its own transaction, only against the
// version of the content it read.

// draftIDPrefix starts every draft id.
const draftIDPrefix = "drf_"

// maxDraftEdits bounds how often an edit is tried again when another edit
// committed between its read and its write.
const maxDraftEdits = 5

// DraftIdempotencyKey is the key a draft is sent under, derived from its
// id alone: whatever was edited, whoever sends it, it is this key.
func DraftIdempotencyKey(id string) string { return "draft:" + id }

// DraftRequest is a draft to create: the fields of a send (r), or, with
// ReplyToID, a reply to that received message whose recipients, subject
// and mailbox are filled as a reply's (ReplyRequest) unless r sets them.
type DraftRequest struct {
	Send      *SendRequest
	ReplyToID string
	ReplyAll  bool
}

// draftContent is what a draft keeps: the caller's fields of a send, named
// as POST /v1/send names them. Threading headers are not kept: a reply
// draft takes them from the message it answers when it is sent.
type draftContent struct {
	To          []string          `json:"to,omitempty"`
	Cc          []string          `json:"cc,omitempty"`
	Bcc         []string          `json:"bcc,omitempty"`
	ReplyTo     []string          `json:"reply_to,omitempty"`
	From        string            `json:"from,omitempty"`
	MailboxID   string            `json:"mailbox_id,omitempty"`
	Subject     string            `json:"subject,omitempty"`
	Text        string            `json:"text,omitempty"`
	HTML        string            `json:"html,omitempty"`
	TemplateID  string            `json:"template_id,omitempty"`
	Variables   map[string]any    `json:"variables,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	Attachments []draftAttachment `json:"attachments,omitempty"`
	ScheduledAt string            `json:"scheduled_at,omitempty"`
	Stream      string            `json:"stream,omitempty"`
	Unsubscribe bool              `json:"unsubscribe,omitempty"`
}

type draftAttachment struct {
	Filename    string `json:"filename,omitempty"`
	Content     []byte `json:"content,omitempty"`
	HasContent  bool   `json:"has_content,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	ContentID   string `json:"content_id,omitempty"`
	Path        string `json:"path,omitempty"`
}

func encodeDraft(r *SendRequest) ([]byte, error) {
	c := draftContent{To: r.To, Cc: r.Cc, Bcc: r.Bcc, ReplyTo: r.ReplyTo, From: r.From, MailboxID: r.MailboxID,
		Subject: r.Subject, Text: r.Text, HTML: r.HTML, TemplateID: r.TemplateID, Variables: r.Variables,
		Headers: r.Headers, Tags: r.Tags, ScheduledAt: r.ScheduledAt, Stream: r.Stream, Unsubscribe: r.Unsubscribe}
	for i, a := range r.Attachments {
		if a.BadContent {
			return nil, core.Errorf(core.CodeValidation, fmt.Sprintf("attachments[%d].content", i), "content must be base64")
		}
		c.Attachments = append(c.Attachments, draftAttachment{Filename: a.Filename, Content: a.Data, HasContent: a.HasContent,
			ContentType: a.ContentType, ContentID: a.ContentID, Path: a.Path})
	}
	return json.Marshal(c)
}

// DraftSendRequest is the send a draft's content asks for.
func DraftSendRequest(d *core.Draft) (*SendRequest, error) {
	var c draftContent
	if err := json.Unmarshal(d.Content, &c); err != nil {
		return nil, fmt.Errorf("decode draft %s: %w", d.ID, err)
	}
	r := &SendRequest{To: c.To, Cc: c.Cc, Bcc: c.Bcc, ReplyTo: c.ReplyTo, From: c.From, MailboxID: c.MailboxID,
		Subject: c.Subject, Text: c.Text, HTML: c.HTML, TemplateID: c.TemplateID, Variables: c.Variables,
		Headers: c.Headers, Tags: c.Tags, ScheduledAt: c.ScheduledAt, Stream: c.Stream, Unsubscribe: c.Unsubscribe}
	for _, a := range c.Attachments {
		r.Attachments = append(r.Attachments, AttachmentRequest{Filename: a.Filename, Data: a.Content, HasContent: a.HasContent,
			ContentType: a.ContentType, ContentID: a.ContentID, Path: a.Path})
	}
	return r, nil
}

// checkDraft refuses what no send of the key could ever carry: more
// recipients than a send takes, or a mailbox the key may not use. The
// rest (addresses, header injection, templates) is checked when it is
// sent, by the send's own rules: a draft may be unfinished.
func checkDraft(key *core.APIKey, r *SendRequest) (mailboxID string, err error) {
	for _, f := range []struct {
		name string
		list []string
	}{{"to", r.To}, {"cc", r.Cc}, {"bcc", r.Bcc}, {"reply_to", r.ReplyTo}} {
		if len(f.list) > MaxRecipients {
			return "", core.Errorf(core.CodeValidation, f.name, "at most %d addresses", MaxRecipients)
		}
	}
	mailboxID = r.MailboxID
	if mailboxID == "" {
		mailboxID = core.DefaultMailboxID
	}
	if !key.MayUseMailbox(mailboxID) {
		return "", core.Errorf(core.CodeForbidden, "mailbox_id", "this API key may not send from mailbox %q", mailboxID)
	}
	return mailboxID, nil
}

// PrepareDraft makes the draft req asks for (outside any transaction);
// AcceptDraft stores it.
func (s *Service) PrepareDraft(ctx context.Context, key *core.APIKey, req DraftRequest) (*core.Draft, error) {
	r := req.Send
	d := &core.Draft{Tenant: key.Tenant, ID: NewID(draftIDPrefix), ReplyToID: req.ReplyToID, Version: 1}
	if req.ReplyToID != "" {
		if !key.Has(core.ScopeRead) {
			return nil, core.Errorf(core.CodeForbidden, "in_reply_to", "a reply draft needs an API key with the read scope")
		}
		m, err := s.ReplyRequest(ctx, key, req.ReplyToID, req.ReplyAll, r)
		if err != nil {
			return nil, err
		}
		d.ThreadID = m.ThreadID
		r.InReplyTo, r.References = "", nil // taken from the message again when it is sent
	}
	var err error
	if d.MailboxID, err = checkDraft(key, r); err != nil {
		return nil, err
	}
	if d.Content, err = encodeDraft(r); err != nil {
		return nil, err
	}
	d.IdempotencyKey = DraftIdempotencyKey(d.ID)
	d.CreatedAt = s.Now()
	d.UpdatedAt = d.CreatedAt
	return d, nil
}

// AcceptDraft stores a prepared draft in tx (the create route's step),
// within the tenant's cap (--max-drafts).
func (s *Service) AcceptDraft(ctx context.Context, tx core.Tx, d *core.Draft) error {
	if err := tx.InsertDraft(ctx, d); err != nil {
		return err
	}
	return s.CheckCap(ctx, tx, core.ResourceDrafts, d.Tenant)
}

// Draft returns one of the key's drafts: ErrNotFound for another tenant's
// or for one of a mailbox the key may not use.
func (s *Service) Draft(ctx context.Context, key *core.APIKey, id string) (*core.Draft, error) {
	d, err := s.store.Draft(ctx, key.Tenant, id)
	if err != nil {
		return nil, err
	}
	if !key.MayUseMailbox(d.MailboxID) {
		return nil, core.ErrNotFound
	}
	return d, nil
}

// ListDrafts returns a page of the key's drafts (of mailboxID alone when
// it is set), newest first, and whether there are more.
func (s *Service) ListDrafts(ctx context.Context, key *core.APIKey, mailboxID string, limit int, after string) ([]*core.Draft, bool, error) {
	f := core.DraftFilter{MailboxIDs: key.Mailboxes, Limit: limit + 1, After: after}
	if mailboxID != "" {
		if !key.MayUseMailbox(mailboxID) {
			return nil, false, core.ErrNotFound
		}
		f.MailboxIDs = []string{mailboxID}
	}
	ds, err := s.store.ListDrafts(ctx, key.Tenant, f)
	if err != nil {
		return nil, false, err
	}
	if len(ds) > limit {
		return ds[:limit], true, nil
	}
	return ds, false, nil
}

// errDraftSent is the answer to changing a draft that was sent.
func errDraftSent() error {
	return core.Errorf(core.CodeInvalidState, "id", "the draft was sent: it can no longer be changed")
}

// UpdateDraft applies edit to the draft's fields while it is unsent (409
// invalid_state once it was sent). An edit that met another one is made
// again on the newer content.
func (s *Service) UpdateDraft(ctx context.Context, key *core.APIKey, id string, edit func(r *SendRequest) error) (*core.Draft, error) {
	for range maxDraftEdits {
		d, err := s.Draft(ctx, key, id)
		if err != nil {
			return nil, err
		}
		if d.SendID != "" {
			return nil, errDraftSent()
		}
		r, err := DraftSendRequest(d)
		if err != nil {
			return nil, err
		}
		if err := edit(r); err != nil {
			return nil, err
		}
		next := *d
		if next.MailboxID, err = checkDraft(key, r); err != nil {
			return nil, err
		}
		if next.Content, err = encodeDraft(r); err != nil {
			return nil, err
		}
		next.Version, next.UpdatedAt = d.Version+1, s.Now()
		var ok bool
		err = s.store.InTx(ctx, func(tx core.Tx) (err error) {
			ok, err = tx.UpdateDraft(ctx, &next, d.Version)
			return err
		})
		if err != nil || ok {
			return &next, err
		}
	}
	return nil, core.Errorf(core.CodeConflict, "id", "the draft is being edited by someone else: read it again")
}

// DeleteDraft deletes a draft, sent or not. A sent one's send stays; a
// deleted draft cannot be sent again (its presses answer 404), so
// deleting never makes a second email possible.
func (s *Service) DeleteDraft(ctx context.Context, key *core.APIKey, id string) error {
	if _, err := s.Draft(ctx, key, id); err != nil {
		return err
	}
	var ok bool
	if err := s.store.InTx(ctx, func(tx core.Tx) (err error) {
		ok, err = tx.DeleteDraft(ctx, key.Tenant, id)
		return err
	}); err != nil {
		return err
	}
	if !ok {
		return core.ErrNotFound
	}
	return nil
}

// DraftSend is a draft's send, prepared: Send to accept, or, for a draft
// that was sent already, Sent, the send it became.
type DraftSend struct {
	Draft *core.Draft
	Send  *core.Send
	Sent  *core.Send
}

// PrepareDraftSend prepares the send of the draft id under its fixed key,
// through the send use case a new message or a reply takes on every door
// (PrepareSend, PrepareReply: the sending key's scopes, guard and
// allowlist apply). edit, when set, adds what the door's send request
// carries (Resend's headers). A draft sent already answers its send.
func (s *Service) PrepareDraftSend(ctx context.Context, key *core.APIKey, id string, guarded bool, edit func(r *SendRequest) error) (*DraftSend, error) {
	d, err := s.Draft(ctx, key, id)
	if err != nil {
		return nil, err
	}
	if d.SendID != "" {
		sent, err := s.store.Send(ctx, key.Tenant, d.SendID)
		if err != nil {
			return nil, err
		}
		return &DraftSend{Draft: d, Sent: sent}, nil
	}
	r, err := DraftSendRequest(d)
	if err == nil && edit != nil {
		err = edit(r)
	}
	if err != nil {
		return nil, err
	}
	var send *core.Send
	if d.ReplyToID != "" {
		send, err = s.PrepareReply(ctx, key, d.IdempotencyKey, d.ReplyToID, false, guarded, r)
	} else {
		send, err = s.PrepareSend(ctx, key, d.IdempotencyKey, r)
	}
	if err != nil {
		return nil, err
	}
	return &DraftSend{Draft: d, Send: send}, nil
}

// AcceptDraftSend records ds in tx: the draft marked with its send, and
// the send accepted, in one transaction — or neither.
func (s *Service) AcceptDraftSend(ctx context.Context, tx core.Tx, key *core.APIKey, ds *DraftSend) (*core.Send, error) {
	if ds.Sent != nil {
		return ds.Sent, nil
	}
	// AcceptSend names the send; the draft is marked with it in the same
	// transaction, only if its content is still the content prepared.
	if err := s.AcceptSend(ctx, tx, key, ds.Send); err != nil {
		return nil, err
	}
	ok, err := tx.MarkDraftSent(ctx, key.Tenant, ds.Draft.ID, ds.Draft.Version, ds.Send.ID, s.Now())
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, core.Errorf(core.CodeConflict, "id", "the draft changed while it was being sent: send it again")
	}
	return ds.Send, nil
}
