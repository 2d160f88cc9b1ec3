package httpapi

import (
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// draftView is a draft on /v1: the fields of its send as POST /v1/send
// names them, and where it stands (status "draft" or "sent", send_id).
type draftView struct {
	ID             string  `json:"id"`
	Object         string  `json:"object"`
	Status         string  `json:"status"`
	Type           string  `json:"type"`
	InReplyTo      *string `json:"in_reply_to"`
	ThreadID       *string `json:"thread_id"`
	IdempotencyKey string  `json:"idempotency_key"`
	SendID         *string `json:"send_id"`
	kit.MessageHeads
	Text        string                `json:"text"`
	HTML        string                `json:"html"`
	TemplateID  *string               `json:"template_id"`
	Variables   map[string]any        `json:"variables"`
	Headers     map[string]string     `json:"headers"`
	Tags        map[string]string     `json:"tags"`
	Attachments []draftAttachmentView `json:"attachments"`
	ScheduledAt *string               `json:"scheduled_at"`
	Stream      string                `json:"stream"`
	Unsubscribe bool                  `json:"unsubscribe"`
	CreatedAt   string                `json:"created_at"`
	UpdatedAt   string                `json:"updated_at"`
	SentAt      *string               `json:"sent_at"`
}

// draftAttachmentView names a draft's file without its content.
type draftAttachmentView struct {
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	Size        int    `json:"size"`
	Path        string `json:"path,omitempty"`
}

func draftType(d *core.Draft) string {
	if d.ReplyToID != "" {
		return "reply"
	}
	return "new"
}

func viewDraft(d *core.Draft) (*draftView, error) {
	r, err := app.DraftSendRequest(d)
	if err != nil {
		return nil, err
	}
	v := &draftView{
		ID: d.ID, Object: "draft", Status: "draft", Type: draftType(d), InReplyTo: kit.OptString(d.ReplyToID),
		ThreadID: kit.OptString(d.ThreadID), IdempotencyKey: d.IdempotencyKey, SendID: kit.OptString(d.SendID),
		MessageHeads: kit.MessageHeads{MailboxID: d.MailboxID, From: r.From, To: kit.NonNil(r.To), Cc: kit.NonNil(r.Cc),
			Bcc: kit.NonNil(r.Bcc), ReplyTo: kit.NonNil(r.ReplyTo), Subject: r.Subject},
		Text: r.Text, HTML: r.HTML,
		TemplateID: kit.OptString(r.TemplateID), Variables: r.Variables, Headers: r.Headers, Tags: r.Tags,
		Attachments: viewDraftAttachments(r.Attachments), ScheduledAt: kit.OptString(r.ScheduledAt), Stream: r.Stream,
		Unsubscribe: r.Unsubscribe, CreatedAt: kit.RFC3339(d.CreatedAt), UpdatedAt: kit.RFC3339(d.UpdatedAt), SentAt: kit.OptTime(d.SentAt),
	}
	if d.SendID != "" {
		v.Status = "sent"
	}
	return v, nil
}

func viewDraftAttachments(as []app.AttachmentRequest) []draftAttachmentView {
	out := make([]draftAttachmentView, 0, len(as))
	for _, a := range as {
		out = append(out, draftAttachmentView{Filename: a.Filename, ContentType: a.ContentType, Size: len(a.Data), Path: a.Path})
	}
	return out
}
