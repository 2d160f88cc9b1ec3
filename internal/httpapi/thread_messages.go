package httpapi

import (
	"cmp"
	"context"
	"net/http"
	"slices"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// A thread's messages are read a page at a time and without bodies: a
// thread of a dozen 8 MB messages from strangers once cost every read of
// it hundreds of megabytes. A page carries each message's preview; its
// bodies come from the message's own read.

// threadMessages is one page of t's messages, oldest first: at most
// ?limit= (1 to 100; 100 when absent) after the ?after= (or ?cursor=)
// message id.
func (s *Server) threadMessages(ctx context.Context, key *core.APIKey, t *core.Thread, r *http.Request) (ms []inboxMessageView, next string, err error) {
	q := r.URL.Query()
	limit := app.MaxThreadPage
	if q.Get("limit") != "" {
		n, err := kit.ParseLimit(q.Get("limit"))
		if err != nil {
			return nil, "", err
		}
		limit = n
	}
	p, err := s.Svc.ThreadPage(ctx, key, t.ID, cmp.Or(q.Get("after"), q.Get("cursor")), limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]inboxMessageView, 0, len(p.Items))
	for _, it := range p.Items {
		if it.Kind == core.ThreadSent {
			send, err := s.Reads.Send(ctx, key.Tenant, it.ID)
			if err != nil {
				continue // purged after its retention
			}
			out = append(out, viewThreadSend(send, false))
			continue
		}
		if m := p.Received[it.ID]; m != nil {
			out = append(out, viewThreadReceived(m, false))
		}
	}
	return out, p.Next, nil
}

// threadMessage reads one message of t with its bodies; ErrNotFound when
// it is not one of t's.
func (s *Server) threadMessage(ctx context.Context, key *core.APIKey, t *core.Thread, id string) (inboxMessageView, error) {
	items, err := s.Svc.ThreadItems(ctx, key, t.ID)
	if err != nil {
		return inboxMessageView{}, err
	}
	i := slices.IndexFunc(items, func(it core.ThreadItem) bool { return it.ID == id })
	if i < 0 {
		return inboxMessageView{}, core.ErrNotFound
	}
	if items[i].Kind == core.ThreadSent {
		send, err := s.Reads.Send(ctx, key.Tenant, id)
		if err != nil {
			return inboxMessageView{}, core.ErrNotFound
		}
		return viewThreadSend(send, true), nil
	}
	m, err := s.Svc.ReceivedMessage(ctx, key, id)
	if err != nil {
		return inboxMessageView{}, err
	}
	return viewThreadReceived(m, true), nil
}

func viewThreadSend(send *core.Send, full bool) inboxMessageView {
	v := inboxMessageView{ID: send.ID, Direction: "outbound", From: send.From, To: kit.NonNil(send.To),
		Cc: kit.NonNil(send.Cc), Bcc: []string{}, ReplyTo: kit.NonNil(send.ReplyTo), Subject: send.Subject,
		MessageID: send.MessageID, Attachments: []resendInboundAttView{}, Read: true,
		ReceivedAt: kit.RFC3339(send.CreatedAt), Preview: app.Preview(send.Text, send.HTML)}
	if full {
		v.HTML, v.Text = &send.HTML, &send.Text
	}
	return v
}

func viewThreadReceived(m *core.ReceivedMessage, full bool) inboxMessageView {
	rv := viewResendReceived(m)
	v := inboxMessageView{ID: m.ID, Direction: "inbound", From: m.From, To: rv.To, Cc: rv.Cc,
		Bcc: []string{}, ReplyTo: rv.ReplyTo, Subject: m.Subject, MessageID: m.MessageID,
		Attachments: rv.Attachments, Read: m.Read, ReceivedAt: kit.RFC3339(m.ReceivedAt), Preview: m.Preview}
	if full {
		v.HTML, v.Text = &m.HTML, &m.Text
	}
	return v
}

func (s *Server) handleResendThreadEmails(w http.ResponseWriter, r *http.Request) {
	key, t, err := s.thread(r)
	var (
		ms   []inboxMessageView
		next string
	)
	if err == nil {
		ms, next, err = s.threadMessages(r.Context(), key, t, r)
	}
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, resendList[inboxMessageView]{Object: "list", HasMore: next != "", Data: ms})
}

func (s *Server) handleResendThreadEmail(w http.ResponseWriter, r *http.Request) {
	key, t, err := s.thread(r)
	var m inboxMessageView
	if err == nil {
		m, err = s.threadMessage(r.Context(), key, t, r.PathValue("email"))
	}
	if err != nil {
		kit.WriteResendError(w, r, s.Logger, err)
		return
	}
	s.AuditRead(r, key, m.ID)
	kit.WriteJSON(w, http.StatusOK, m)
}
