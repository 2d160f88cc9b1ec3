package resend

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// Resend's inbox drafts, as its Node SDK (resend 6.38) calls them:
// inboxes.drafts.create/list/get/update/remove/send under
// /inboxes/{inbox}/drafts. They are the native drafts (drafts.go) seen
// through one inbox: a draft of another mailbox is, here, one that does
// not exist. Sending is the one draft send (drafts_send.go), so a draft
// sent here and on /v1 is one email.

// resendDraftBody is the body of create and update; on update a field
// the body has replaces the draft's (null or [] clears it).
type resendDraftBody struct {
	To             kit.AddrList         `json:"to"`
	Cc             kit.AddrList         `json:"cc"`
	Bcc            kit.AddrList         `json:"bcc"`
	Subject        *string              `json:"subject"`
	Text           *string              `json:"text"`
	HTML           *string              `json:"html"`
	Attachments    []kit.AttachmentJSON `json:"attachments"`
	ThreadID       string               `json:"thread_id"`
	ReplyToEmailID string               `json:"reply_to_email_id"`
	present        map[string]json.RawMessage
}

func decodeResendDraft(body []byte, create bool) (*resendDraftBody, error) {
	var req resendDraftBody
	var err error
	if req.present, err = kit.DecodePatch(body, &req); err != nil {
		return nil, err
	}
	if !create && (req.ThreadID != "" || req.ReplyToEmailID != "") {
		return nil, core.Errorf(core.CodeValidation, "reply_to_email_id", "a draft's thread is set when it is created")
	}
	if (req.ThreadID == "") != (req.ReplyToEmailID == "") {
		return nil, core.Errorf(core.CodeValidation, "reply_to_email_id", "thread_id and reply_to_email_id go together")
	}
	return &req, kit.CheckRecipientCounts(req.To, req.Cc, req.Bcc, nil)
}

// apply copies the fields the body has onto r.
func (b *resendDraftBody) apply(r *app.SendRequest) {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	in := &app.SendRequest{To: b.To, Cc: b.Cc, Bcc: b.Bcc, Subject: str(b.Subject), Text: str(b.Text), HTML: str(b.HTML),
		Attachments: kit.AppAttachments(b.Attachments)}
	for name := range b.present {
		kit.PatchSendField(name, in, r)
	}
}

func (s *API) CreateDraft(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, _ string) (kit.WriteStep, error) {
	req, err := decodeResendDraft(body, true)
	if err != nil {
		return nil, err
	}
	_, in, err := s.inbox(r)
	if err != nil {
		return nil, err
	}
	if req.ReplyToEmailID != "" {
		m, err := s.Svc.ReceivedMessage(ctx, key, req.ReplyToEmailID)
		if err != nil || m.ThreadID != req.ThreadID || m.MailboxID != in.Mailbox.ID {
			return nil, core.ErrNotFound
		}
	}
	sr := &app.SendRequest{MailboxID: in.Mailbox.ID}
	req.apply(sr)
	d, err := s.Svc.PrepareDraft(ctx, key, app.DraftRequest{Send: sr, ReplyToID: req.ReplyToEmailID})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx core.Tx) (int, any, error) {
		if err := s.Svc.AcceptDraft(ctx, tx, d); err != nil {
			return 0, nil, err
		}
		return http.StatusOK, resendRef{Object: "inbox_draft", ID: d.ID}, nil
	}, nil
}

// inboxDraft reads the draft of the path in the inbox of the path.
func (s *API) inboxDraft(r *http.Request) (*core.APIKey, *core.Draft, error) {
	return inInbox(s, r, "draft", s.Svc.Draft, func(d *core.Draft) string { return d.MailboxID })
}

func (s *API) ListDrafts(w http.ResponseWriter, r *http.Request) {
	key, in, err := s.inbox(r)
	q := r.URL.Query()
	var limit int
	if err == nil {
		limit, err = kit.ParseLimit(q.Get("limit"))
	}
	if err == nil && q.Get("before") != "" {
		err = core.Errorf(core.CodeValidation, "before", "drafts are listed forwards only: use after")
	}
	var (
		ds   []*core.Draft
		more bool
	)
	if err == nil {
		ds, more, err = s.Svc.ListDrafts(r.Context(), key, in.Mailbox.ID, limit, q.Get("after"))
	}
	out := kit.ResendList[resendDraftItem]{Object: "list", HasMore: more}
	if err == nil {
		out.Data, err = kit.TryViews(ds, resendDraftItemOf)
	}
	s.AnswerResend(w, r, out, err)
}

func (s *API) GetDraft(w http.ResponseWriter, r *http.Request) {
	_, d, err := s.inboxDraft(r)
	var v *resendDraftView
	if err == nil {
		v, err = viewResendDraft(d)
	}
	s.AnswerResend(w, r, v, err)
}

func (s *API) UpdateDraft(w http.ResponseWriter, r *http.Request) {
	key, d, err := s.inboxDraft(r)
	var body []byte
	if err == nil {
		body, err = s.ReadBody(w, r)
	}
	var req *resendDraftBody
	if err == nil {
		req, err = decodeResendDraft(body, false)
	}
	if err == nil {
		_, err = s.Svc.UpdateDraft(r.Context(), key, d.ID, func(sr *app.SendRequest) error { req.apply(sr); return nil })
	}
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, resendRef{Object: "inbox_draft", ID: d.ID})
}

func (s *API) RemoveDraft(w http.ResponseWriter, r *http.Request) {
	key, d, err := s.inboxDraft(r)
	if err == nil {
		err = s.Svc.DeleteDraft(r.Context(), key, d.ID)
	}
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, map[string]any{"object": "inbox_draft", "id": d.ID, "deleted": true})
}

// DraftSend reads Resend's send: {"headers": {…}} or no body. The
// headers are added to the send the draft becomes (not to the draft);
// the threading headers and Reply-To are sendonce's to set.
func (s *API) DraftSend(r *http.Request, body []byte) (string, func(*app.SendRequest) error, error) {
	var req struct {
		Headers map[string]string `json:"headers"`
	}
	if len(body) > 0 {
		if err := kit.DecodeStrict(body, &req); err != nil {
			return "", nil, err
		}
	}
	for h := range req.Headers {
		switch strings.ToLower(h) {
		case "in-reply-to", "references", "reply-to":
			return "", nil, core.Errorf(core.CodeValidation, "headers", "the %s header is set by sendonce", h)
		}
	}
	_, d, err := s.inboxDraft(r)
	if err != nil {
		return "", nil, err
	}
	return d.ID, func(sr *app.SendRequest) error {
		if len(req.Headers) > 0 && sr.Headers == nil {
			sr.Headers = map[string]string{}
		}
		for k, v := range req.Headers {
			sr.Headers[k] = v
		}
		return nil
	}, nil
}

// resendDraftView is Resend's InboxDraft.
type resendDraftView struct {
	Object string `json:"object"`
	resendDraftHead
	HTML           *string                `json:"html"`
	Text           *string                `json:"text"`
	ThreadID       *string                `json:"thread_id"`
	ReplyToEmailID *string                `json:"reply_to_email_id"`
	EmailID        *string                `json:"email_id"`
	CreatedAt      string                 `json:"created_at"`
	UpdatedAt      string                 `json:"updated_at"`
	Attachments    []resendDraftAttachmnt `json:"attachments"`
}

// resendDraftItem is Resend's InboxDraftListItem.
type resendDraftItem struct {
	resendDraftHead
	Snippet        *string                `json:"snippet"`
	ThreadID       *string                `json:"thread_id"`
	ReplyToEmailID *string                `json:"reply_to_email_id"`
	UpdatedAt      string                 `json:"updated_at"`
	Attachments    []resendDraftAttachmnt `json:"attachments"`
}

// resendDraftHead is what a draft and its list item both begin with.
type resendDraftHead struct {
	ID      string   `json:"id"`
	Type    string   `json:"type"`
	To      []string `json:"to"`
	Cc      []string `json:"cc"`
	Bcc     []string `json:"bcc"`
	Subject *string  `json:"subject"`
}

type resendDraftAttachmnt struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	Size        int    `json:"size"`
}

// snippetRunes is how much of a draft's text a list shows.
const snippetRunes = 100

func viewResendDraft(d *core.Draft) (*resendDraftView, error) {
	r, err := app.DraftSendRequest(d)
	if err != nil {
		return nil, err
	}
	typ := "standalone"
	if d.ReplyToID != "" {
		typ = "reply"
	}
	head := resendDraftHead{ID: d.ID, Type: typ, To: r.To, Cc: kit.NonNil(r.Cc), Bcc: kit.NonNil(r.Bcc), Subject: kit.OptString(r.Subject)}
	v := &resendDraftView{Object: "inbox_draft", resendDraftHead: head, HTML: kit.OptString(r.HTML), Text: kit.OptString(r.Text),
		ThreadID: kit.OptString(d.ThreadID), ReplyToEmailID: kit.OptString(d.ReplyToID), EmailID: kit.OptString(d.SendID), CreatedAt: kit.RFC3339(d.CreatedAt),
		UpdatedAt: kit.RFC3339(d.UpdatedAt), Attachments: make([]resendDraftAttachmnt, 0, len(r.Attachments))}
	for i, a := range r.Attachments {
		v.Attachments = append(v.Attachments, resendDraftAttachmnt{ID: d.ID + "-" + strconv.Itoa(i), Filename: a.Filename,
			ContentType: a.ContentType, Size: len(a.Data)})
	}
	return v, nil
}

// resendDraftItemOf is d as Resend lists it.
func resendDraftItemOf(d *core.Draft) (resendDraftItem, error) {
	v, err := viewResendDraft(d)
	if err != nil {
		return resendDraftItem{}, err
	}
	return v.item(), nil
}

func (v *resendDraftView) item() resendDraftItem {
	var snippet *string
	if v.Text != nil {
		s, n := *v.Text, 0
		for i := range s { // cut at a rune boundary, reading no further
			if n == snippetRunes {
				s = s[:i]
				break
			}
			n++
		}
		snippet = &s
	}
	return resendDraftItem{resendDraftHead: v.resendDraftHead, Snippet: snippet,
		ThreadID: v.ThreadID, ReplyToEmailID: v.ReplyToEmailID, UpdatedAt: v.UpdatedAt, Attachments: v.Attachments}
}
