package kit

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// ThreadFilter reads the list and search parameters of the thread routes.
func ThreadFilter(r *http.Request, mailboxID string) (core.ThreadFilter, error) {
	q := r.URL.Query()
	limit, err := ParseLimit(q.Get("limit"))
	if err != nil {
		return core.ThreadFilter{}, err
	}
	f := core.ThreadFilter{Limit: limit, After: q.Get("after"), Query: q.Get("query"), Label: q.Get("labels")}
	if mailboxID != "" {
		f.MailboxIDs = []string{mailboxID}
	}
	for _, v := range q["folders"] {
		f.Folders = append(f.Folders, strings.Split(v, ",")...)
	}
	if v := q.Get("read"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return f, core.Errorf(core.CodeValidation, "read", "read must be true or false")
		}
		f.Read = &b
	}
	return f, nil
}

// InboxMessageView is Resend's InboxMessage: a received message or a
// send of the thread.
type InboxMessageView struct {
	ID          string                 `json:"id"`
	Direction   string                 `json:"direction"`
	From        string                 `json:"from"`
	To          []string               `json:"to"`
	Cc          []string               `json:"cc"`
	Bcc         []string               `json:"bcc"`
	ReplyTo     []string               `json:"reply_to"`
	Subject     string                 `json:"subject"`
	MessageID   string                 `json:"message_id"`
	HTML        *string                `json:"html"`
	Text        *string                `json:"text"`
	Attachments []ResendInboundAttView `json:"attachments"`
	Read        bool                   `json:"read"`
	ReceivedAt  string                 `json:"received_at"`
	// Preview is the start of the text: a page of a thread carries it
	// instead of the bodies (null there), which one message's read has.
	Preview string `json:"preview"`
}

// ThreadMessages is one page of t's messages, oldest first: at most
// ?limit= (1 to 100; 100 when absent) after the ?after= (or ?cursor=)
// message id.
func (s *Base) ThreadMessages(ctx context.Context, key *core.APIKey, t *core.Thread, r *http.Request) (ms []InboxMessageView, next string, err error) {
	q := r.URL.Query()
	limit := app.MaxThreadPage
	if q.Get("limit") != "" {
		n, err := ParseLimit(q.Get("limit"))
		if err != nil {
			return nil, "", err
		}
		limit = n
	}
	p, err := s.Svc.ThreadPage(ctx, key, t.ID, cmp.Or(q.Get("after"), q.Get("cursor")), limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]InboxMessageView, 0, len(p.Items))
	for _, it := range p.Items {
		if it.Kind == core.ThreadSent {
			send, err := s.Reads.Send(ctx, key.Tenant, it.ID)
			if err != nil {
				continue // purged after its retention
			}
			out = append(out, ViewThreadSend(send, false))
			continue
		}
		if m := p.Received[it.ID]; m != nil {
			out = append(out, ViewThreadReceived(m, false))
		}
	}
	return out, p.Next, nil
}

// LookedUpThreadMessages is ThreadMessages of the thread a route just
// looked up, or that lookup's error: the native and the Resend thread
// routes each find t their own way, then read its page alike.
func (s *Base) LookedUpThreadMessages(r *http.Request, key *core.APIKey, t *core.Thread, lookupErr error) ([]InboxMessageView, string, error) {
	if lookupErr != nil {
		return nil, "", lookupErr
	}
	return s.ThreadMessages(r.Context(), key, t, r)
}

// ThreadMessage reads one message of t with its bodies; ErrNotFound when
// it is not one of t's.
func (s *Base) ThreadMessage(ctx context.Context, key *core.APIKey, t *core.Thread, id string) (InboxMessageView, error) {
	items, err := s.Svc.ThreadItems(ctx, key, t.ID)
	if err != nil {
		return InboxMessageView{}, err
	}
	i := slices.IndexFunc(items, func(it core.ThreadItem) bool { return it.ID == id })
	if i < 0 {
		return InboxMessageView{}, core.ErrNotFound
	}
	if items[i].Kind == core.ThreadSent {
		send, err := s.Reads.Send(ctx, key.Tenant, id)
		if err != nil {
			return InboxMessageView{}, core.ErrNotFound
		}
		return ViewThreadSend(send, true), nil
	}
	m, err := s.Svc.ReceivedMessage(ctx, key, id)
	if err != nil {
		return InboxMessageView{}, err
	}
	return ViewThreadReceived(m, true), nil
}

func ViewThreadSend(send *core.Send, full bool) InboxMessageView {
	v := InboxMessageView{ID: send.ID, Direction: "outbound", From: send.From, To: NonNil(send.To),
		Cc: NonNil(send.Cc), Bcc: []string{}, ReplyTo: NonNil(send.ReplyTo), Subject: send.Subject,
		MessageID: send.MessageID, Attachments: []ResendInboundAttView{}, Read: true,
		ReceivedAt: RFC3339(send.CreatedAt), Preview: app.Preview(send.Text, send.HTML)}
	if full {
		v.HTML, v.Text = &send.HTML, &send.Text
	}
	return v
}

func ViewThreadReceived(m *core.ReceivedMessage, full bool) InboxMessageView {
	rv := ViewResendReceived(m)
	v := InboxMessageView{ID: m.ID, Direction: "inbound", From: m.From, To: rv.To, Cc: rv.Cc,
		Bcc: []string{}, ReplyTo: rv.ReplyTo, Subject: m.Subject, MessageID: m.MessageID,
		Attachments: rv.Attachments, Read: m.Read, ReceivedAt: RFC3339(m.ReceivedAt), Preview: m.Preview}
	if full {
		v.HTML, v.Text = &m.HTML, &m.Text
	}
	return v
}

type ResendReceivedView struct {
	Object      string                 `json:"object"`
	ID          string                 `json:"id"`
	To          []string               `json:"to"`
	From        string                 `json:"from"`
	CreatedAt   string                 `json:"created_at"`
	Subject     string                 `json:"subject"`
	Bcc         []string               `json:"bcc"`
	Cc          []string               `json:"cc"`
	ReplyTo     []string               `json:"reply_to"`
	ReceivedFor []string               `json:"received_for"`
	HTML        *string                `json:"html,omitempty"`
	Text        *string                `json:"text,omitempty"`
	Headers     map[string]string      `json:"headers,omitempty"`
	MessageID   string                 `json:"message_id"`
	Raw         *ResendDownload        `json:"raw,omitempty"`
	Attachments []ResendInboundAttView `json:"attachments"`
}

type ResendInboundAttView struct {
	ID                 string `json:"id"`
	Filename           string `json:"filename"`
	Size               int    `json:"size"`
	ContentType        string `json:"content_type"`
	ContentID          string `json:"content_id"`
	ContentDisposition string `json:"content_disposition"`
	DownloadURL        string `json:"download_url,omitempty"`
	ExpiresAt          string `json:"expires_at,omitempty"`
}

func ViewResendReceived(m *core.ReceivedMessage) ResendReceivedView {
	v := ResendReceivedView{Object: "email", ID: m.ID, To: NonNil(m.To), From: m.From, CreatedAt: RFC3339(m.ReceivedAt),
		Subject: m.Subject, Bcc: []string{}, Cc: NonNil(m.Cc), ReplyTo: NonNil(m.ReplyTo), ReceivedFor: NonNil(m.RcptTo),
		MessageID: m.MessageID, Attachments: []ResendInboundAttView{}}
	for _, a := range m.Attachments {
		v.Attachments = append(v.Attachments, ResendInboundAttView{ID: a.ID, Filename: a.Filename, Size: a.Size,
			ContentType: a.ContentType, ContentID: a.ContentID, ContentDisposition: a.Disposition})
	}
	return v
}

type ResendDownload struct {
	DownloadURL string `json:"download_url"`
	ExpiresAt   string `json:"expires_at"`
}
