package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/message"
)

// The native receiving routes (docs/api.md, "Receiving").

type listPage[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor,omitempty"`
}

func receivedFilter(r *http.Request) (core.ReceivedFilter, error) {
	q := r.URL.Query()
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		return core.ReceivedFilter{}, err
	}
	f := core.ReceivedFilter{Limit: limit, After: q.Get("cursor"), ThreadID: q.Get("thread_id"), From: q.Get("from")}
	if v := q.Get("mailbox_id"); v != "" {
		f.MailboxIDs = []string{v}
	}
	for _, p := range []struct {
		name string
		dst  **time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(p.name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return f, core.Errorf(core.CodeValidation, p.name, "%s must be an RFC 3339 time", p.name)
			}
			*p.dst = &t
		}
	}
	if f.Folder, err = receivedFolder(q.Get("folder")); err != nil {
		return f, err
	}
	if v := q.Get("has_attachment"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return f, core.Errorf(core.CodeValidation, "has_attachment", "has_attachment must be true or false")
		}
		f.HasAttachment = &b
	}
	return f, nil
}

func (s *Server) handleListReceived(w http.ResponseWriter, r *http.Request) {
	f, err := receivedFilter(r)
	s.writeReceivedPage(w, r, f, err)
}

// writeReceivedPage answers a page of received messages under f (or the
// error err the request's filter made), as the native list and Mailera's
// mailbox messages show them, and audits the read.
func (s *Server) writeReceivedPage(w http.ResponseWriter, r *http.Request, f core.ReceivedFilter, err error) {
	key := apiKeyFrom(r.Context())
	var ms []*core.ReceivedMessage
	var more bool
	if err == nil {
		ms, more, err = s.svc.ListReceived(r.Context(), key, f)
	}
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	out := listPage[receivedView]{Data: make([]receivedView, 0, len(ms))}
	ids := make([]string, 0, len(ms))
	for _, m := range ms {
		out.Data = append(out.Data, viewReceived(m, false))
		ids = append(ids, m.ID)
	}
	if more {
		out.NextCursor = ms[len(ms)-1].ID
	}
	s.auditRead(r, key, ids...)
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleGetReceived(w http.ResponseWriter, r *http.Request) {
	m, err := s.svc.ReceivedMessage(r.Context(), apiKeyFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	s.auditRead(r, apiKeyFrom(r.Context()), m.ID)
	writeJSON(w, http.StatusOK, viewReceived(m, true))
}

func (s *Server) handleGetReceivedRaw(w http.ResponseWriter, r *http.Request) {
	raw, err := s.svc.ReceivedRaw(r.Context(), apiKeyFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	s.auditRead(r, apiKeyFrom(r.Context()), r.PathValue("id"))
	w.Header().Set("Content-Type", "message/rfc822")
	w.Header().Set("Content-Disposition", `attachment; filename="`+r.PathValue("id")+`.eml"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(raw)
}

func (s *Server) handleGetReceivedAttachment(w http.ResponseWriter, r *http.Request) {
	att, b, err := s.svc.ReceivedAttachment(r.Context(), apiKeyFrom(r.Context()), r.PathValue("id"), r.PathValue("attachment"))
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	s.auditRead(r, apiKeyFrom(r.Context()), r.PathValue("id"))
	w.Header().Set("Content-Type", att.ContentType)
	w.Header().Set("Content-Disposition", message.AttachmentDisposition(att.Filename))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(b)
}

func (s *Server) handleListThreads(w http.ResponseWriter, r *http.Request) {
	f, err := threadFilter(r, r.URL.Query().Get("mailbox_id"))
	f.After = r.URL.Query().Get("cursor")
	var ts []*core.Thread
	var more bool
	if err == nil {
		ts, more, err = s.svc.ListThreads(r.Context(), apiKeyFrom(r.Context()), f)
	}
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	out := listPage[threadView]{Data: make([]threadView, 0, len(ts))}
	for _, t := range ts {
		out.Data = append(out.Data, viewThread(t))
	}
	if more {
		out.NextCursor = ts[len(ts)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

// threadDetail is a thread with one page of its messages (previews, no
// bodies); next_cursor reads the next page (?cursor=).
type threadDetail struct {
	threadView
	Messages   []inboxMessageView `json:"messages"`
	NextCursor string             `json:"next_cursor,omitempty"`
}

func (s *Server) handleGetThread(w http.ResponseWriter, r *http.Request) {
	key := apiKeyFrom(r.Context())
	t, err := s.svc.Thread(r.Context(), key, r.PathValue("id"))
	var (
		ms   []inboxMessageView
		next string
	)
	if err == nil {
		ms, next, err = s.threadMessages(r.Context(), key, t, r)
	}
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeJSON(w, http.StatusOK, threadDetail{threadView: viewThread(t), Messages: ms, NextCursor: next})
}

func (s *Server) handlePatchThread(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Read   *bool     `json:"read"`
		Folder *string   `json:"folder"`
		Labels *[]string `json:"labels"`
	}
	body, err := s.readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	var t *core.Thread
	if err == nil {
		t, err = s.svc.ChangeThread(r.Context(), apiKeyFrom(r.Context()), r.PathValue("id"),
			app.ThreadChange{Read: req.Read, Folder: req.Folder, Labels: req.Labels})
	}
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeJSON(w, http.StatusOK, viewThread(t))
}

// handleReplyReceived answers a received message: POST
// /v1/received/{id}/reply, idempotent like every send.
func (s *Server) handleReplyReceived(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (writeStep, error) {
	var req struct {
		sendRequest
		ReplyAll bool `json:"reply_all"`
	}
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	sr := req.toApp(req.MailboxID) // every field of a send, scheduled_at included
	// An agent's reply outside the thread waits for a person
	// (received_agent.go).
	send, err := s.svc.PrepareReply(ctx, key, idemKey, r.PathValue("id"), req.ReplyAll, app.Guarded(key, agentAsked(r)), sr)
	if err != nil {
		return nil, err
	}
	return s.acceptStep(key, send), nil
}
