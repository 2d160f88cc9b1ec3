package kit

import (
	"cmp"
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// receivedView is a received message on the native routes.
type receivedView struct {
	Object         string            `json:"object"`
	ID             string            `json:"id"`
	MailboxID      string            `json:"mailbox_id"`
	ThreadID       string            `json:"thread_id"`
	Source         string            `json:"source"`
	MailFrom       string            `json:"mail_from"`
	RcptTo         []string          `json:"rcpt_to"`
	MessageID      string            `json:"message_id"`
	InReplyTo      string            `json:"in_reply_to"`
	References     []string          `json:"references"`
	From           string            `json:"from"`
	To             []string          `json:"to"`
	Cc             []string          `json:"cc"`
	ReplyTo        []string          `json:"reply_to"`
	Subject        string            `json:"subject"`
	Preview        string            `json:"preview"`
	Date           *time.Time        `json:"date"`
	Text           *string           `json:"text,omitempty"`
	HTML           *string           `json:"html,omitempty"`
	Headers        []headerView      `json:"headers,omitempty"`
	Attachments    []attachmentView  `json:"attachments"`
	Authentication core.ReceivedAuth `json:"authentication"`
	Size           int               `json:"size"`
	Read           bool              `json:"read"`
	Folder         string            `json:"folder"`
	SendID         string            `json:"send_id,omitempty"`
	ReceivedAt     time.Time         `json:"received_at"`
}

type headerView struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type attachmentView struct {
	ID                 string `json:"id"`
	Filename           string `json:"filename"`
	ContentType        string `json:"content_type"`
	ContentID          string `json:"content_id"`
	ContentDisposition string `json:"content_disposition"`
	Size               int    `json:"size"`
}

func ViewReceived(m *core.ReceivedMessage, full bool) receivedView {
	v := receivedView{Object: "received_message", ID: m.ID, MailboxID: m.MailboxID, ThreadID: m.ThreadID, Source: m.Source,
		MailFrom: m.MailFrom, RcptTo: NonNil(m.RcptTo), MessageID: m.MessageID, InReplyTo: m.InReplyTo,
		References: NonNil(m.References), From: m.From, To: NonNil(m.To), Cc: NonNil(m.Cc), ReplyTo: NonNil(m.ReplyTo),
		Subject: m.Subject, Preview: m.Preview, Date: m.Date, Attachments: viewAttachments(m.Attachments), Authentication: m.Auth,
		Size: m.Size, Read: m.Read, Folder: cmp.Or(m.Folder, core.FolderInbox), SendID: m.SendID, ReceivedAt: m.ReceivedAt}
	if full {
		v.Text, v.HTML = &m.Text, &m.HTML
		v.Headers = make([]headerView, 0, len(m.Headers))
		for _, h := range m.Headers {
			v.Headers = append(v.Headers, headerView{Name: h.Name, Value: h.Value})
		}
	}
	return v
}

func viewAttachments(as []core.ReceivedAttachment) []attachmentView {
	out := make([]attachmentView, 0, len(as))
	for _, a := range as {
		out = append(out, attachmentView{ID: a.ID, Filename: a.Filename, ContentType: a.ContentType,
			ContentID: a.ContentID, ContentDisposition: a.Disposition, Size: a.Size})
	}
	return out
}

// ThreadView is a thread on the native routes and, in Resend's shape
// (InboxThread), on the inbox routes.
type ThreadView struct {
	Object        string    `json:"object"`
	ID            string    `json:"id"`
	InboxID       string    `json:"inbox_id"`
	Subject       string    `json:"subject"`
	From          string    `json:"from"`
	To            []string  `json:"to"`
	Cc            []string  `json:"cc"`
	Bcc           []string  `json:"bcc"`
	Labels        []any     `json:"labels"`
	EmailCount    int       `json:"email_count"`
	Unread        int       `json:"unread"`
	HasAttachment bool      `json:"has_attachment"`
	HasDraft      bool      `json:"has_draft"`
	Read          bool      `json:"read"`
	Folder        string    `json:"folder"`
	ReceivedAt    time.Time `json:"received_at"`
}

type labelView struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Color string `json:"color"`
}

func ViewThread(t *core.Thread) ThreadView {
	v := ThreadView{Object: "inbox_thread", ID: t.ID, InboxID: t.MailboxID, Subject: t.Subject, From: t.From,
		To: NonNil(t.To), Cc: NonNil(t.Cc), Bcc: []string{}, Labels: []any{}, EmailCount: t.Messages, Unread: t.Unread,
		HasAttachment: t.HasAttachment, Read: t.Unread == 0, Folder: t.Folder, ReceivedAt: t.LastAt}
	for _, l := range t.Labels {
		v.Labels = append(v.Labels, labelView{ID: l, Name: l, Color: "#888888"})
	}
	return v
}

// DownloadURL is the short-lived link to a received message's raw bytes
// (part "") or to one attachment: it carries its own signature, because
// the clients that follow it (Resend's SDK forward) send no key.
func (s *Base) DownloadURL(ctx context.Context, r *http.Request, m *core.ReceivedMessage, part string) (string, time.Time, error) {
	exp := s.Svc.Now().Add(app.DownloadTTL).Truncate(time.Second)
	tok, err := s.Svc.DownloadToken(ctx, m.Tenant, m.ID, part, exp)
	if err != nil {
		return "", time.Time{}, err
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	path := "/emails/receiving/" + url.PathEscape(m.ID) + "/raw"
	if part != "" {
		path = "/emails/receiving/" + url.PathEscape(m.ID) + "/attachments/" + url.PathEscape(part) + "/content"
	}
	return scheme + "://" + r.Host + path + "?token=" + url.QueryEscape(tok), exp, nil
}
