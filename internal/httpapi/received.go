package httpapi

import (
	"context"
	"net/http"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/message"
)

// The native receiving routes (docs/api.md, "Receiving").

func (s *Server) handleListReceived(w http.ResponseWriter, r *http.Request) {
	f, err := ReceivedFilter(r)
	s.WriteReceivedPage(w, r, f, err)
}

func (s *Server) handleGetReceived(w http.ResponseWriter, r *http.Request) {
	m, err := s.Svc.ReceivedMessage(r.Context(), APIKeyFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	s.AuditRead(r, APIKeyFrom(r.Context()), m.ID)
	WriteJSON(w, http.StatusOK, ViewReceived(m, true))
}

func (s *Server) handleGetReceivedRaw(w http.ResponseWriter, r *http.Request) {
	raw, err := s.Svc.ReceivedRaw(r.Context(), APIKeyFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	s.AuditRead(r, APIKeyFrom(r.Context()), r.PathValue("id"))
	w.Header().Set("Content-Type", "message/rfc822")
	w.Header().Set("Content-Disposition", `attachment; filename="`+r.PathValue("id")+`.eml"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(raw)
}

func (s *Server) handleGetReceivedAttachment(w http.ResponseWriter, r *http.Request) {
	att, b, err := s.Svc.ReceivedAttachment(r.Context(), APIKeyFrom(r.Context()), r.PathValue("id"), r.PathValue("attachment"))
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	s.AuditRead(r, APIKeyFrom(r.Context()), r.PathValue("id"))
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
		ts, more, err = s.Svc.ListThreads(r.Context(), APIKeyFrom(r.Context()), f)
	}
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	out := ListPage[ThreadView]{Data: make([]ThreadView, 0, len(ts))}
	for _, t := range ts {
		out.Data = append(out.Data, ViewThread(t))
	}
	if more {
		out.NextCursor = ts[len(ts)-1].ID
	}
	WriteJSON(w, http.StatusOK, out)
}

// threadDetail is a thread with one page of its messages (previews, no
// bodies); next_cursor reads the next page (?cursor=).
type threadDetail struct {
	ThreadView
	Messages   []inboxMessageView `json:"messages"`
	NextCursor string             `json:"next_cursor,omitempty"`
}

func (s *Server) handleGetThread(w http.ResponseWriter, r *http.Request) {
	key := APIKeyFrom(r.Context())
	t, err := s.Svc.Thread(r.Context(), key, r.PathValue("id"))
	var (
		ms   []inboxMessageView
		next string
	)
	if err == nil {
		ms, next, err = s.threadMessages(r.Context(), key, t, r)
	}
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	WriteJSON(w, http.StatusOK, threadDetail{ThreadView: ViewThread(t), Messages: ms, NextCursor: next})
}

func (s *Server) handlePatchThread(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Read   *bool     `json:"read"`
		Folder *string   `json:"folder"`
		Labels *[]string `json:"labels"`
	}
	body, err := s.ReadBody(w, r)
	if err == nil {
		err = DecodeStrict(body, &req)
	}
	var t *core.Thread
	if err == nil {
		t, err = s.Svc.ChangeThread(r.Context(), APIKeyFrom(r.Context()), r.PathValue("id"),
			app.ThreadChange{Read: req.Read, Folder: req.Folder, Labels: req.Labels})
	}
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	WriteJSON(w, http.StatusOK, ViewThread(t))
}

// handleReplyReceived answers a received message: POST
// /v1/received/{id}/reply, idempotent like every send.
func (s *Server) handleReplyReceived(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (WriteStep, error) {
	var req struct {
		SendRequest
		ReplyAll bool `json:"reply_all"`
	}
	if err := DecodeStrict(body, &req); err != nil {
		return nil, err
	}
	sr := req.ToApp(req.MailboxID) // every field of a send, scheduled_at included
	// An agent's reply outside the thread waits for a person
	// (received_agent.go).
	send, err := s.Svc.PrepareReply(ctx, key, idemKey, r.PathValue("id"), req.ReplyAll, app.Guarded(key, AgentAsked(r)), sr)
	if err != nil {
		return nil, err
	}
	return s.AcceptStep(key, send), nil
}
