package httpapi

import (
	"context"
	"net/http"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
	"github.com/sendonce/sendonce/internal/message"
)

// The native receiving routes (docs/api.md, "Receiving").

func (s *Server) handleListReceived(w http.ResponseWriter, r *http.Request) {
	f, err := kit.ReceivedFilter(r)
	s.WriteReceivedPage(w, r, f, err)
}

func (s *Server) handleGetReceived(w http.ResponseWriter, r *http.Request) {
	m, err := s.Svc.ReceivedMessage(r.Context(), kit.APIKeyFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	s.AuditRead(r, kit.APIKeyFrom(r.Context()), m.ID)
	kit.WriteJSON(w, http.StatusOK, kit.ViewReceived(m, true))
}

func (s *Server) handleGetReceivedRaw(w http.ResponseWriter, r *http.Request) {
	raw, err := s.Svc.ReceivedRaw(r.Context(), kit.APIKeyFrom(r.Context()), r.PathValue("id"))
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	s.AuditRead(r, kit.APIKeyFrom(r.Context()), r.PathValue("id"))
	w.Header().Set("Content-Type", "message/rfc822")
	w.Header().Set("Content-Disposition", `attachment; filename="`+r.PathValue("id")+`.eml"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(raw)
}

func (s *Server) handleGetReceivedAttachment(w http.ResponseWriter, r *http.Request) {
	att, b, err := s.Svc.ReceivedAttachment(r.Context(), kit.APIKeyFrom(r.Context()), r.PathValue("id"), r.PathValue("attachment"))
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	s.AuditRead(r, kit.APIKeyFrom(r.Context()), r.PathValue("id"))
	w.Header().Set("Content-Type", att.ContentType)
	w.Header().Set("Content-Disposition", message.AttachmentDisposition(att.Filename))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(b)
}

func (s *Server) handleListThreads(w http.ResponseWriter, r *http.Request) {
	f, err := kit.ThreadFilter(r, r.URL.Query().Get("mailbox_id"))
	f.After = r.URL.Query().Get("cursor")
	var ts []*core.Thread
	var more bool
	if err == nil {
		ts, more, err = s.Svc.ListThreads(r.Context(), kit.APIKeyFrom(r.Context()), f)
	}
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	out := kit.ListPage[kit.ThreadView]{Data: make([]kit.ThreadView, 0, len(ts))}
	for _, t := range ts {
		out.Data = append(out.Data, kit.ViewThread(t))
	}
	if more {
		out.NextCursor = ts[len(ts)-1].ID
	}
	kit.WriteJSON(w, http.StatusOK, out)
}

// threadDetail is a thread with one page of its messages (previews, no
// bodies); next_cursor reads the next page (?cursor=).
type threadDetail struct {
	kit.ThreadView
	Messages   []kit.InboxMessageView `json:"messages"`
	NextCursor string                 `json:"next_cursor,omitempty"`
}

func (s *Server) handleGetThread(w http.ResponseWriter, r *http.Request) {
	key := kit.APIKeyFrom(r.Context())
	t, err := s.Svc.Thread(r.Context(), key, r.PathValue("id"))
	ms, next, err := s.LookedUpThreadMessages(r, key, t, err)
	if err != nil {
		kit.WriteError(w, r, s.Logger, err)
		return
	}
	kit.WriteJSON(w, http.StatusOK, threadDetail{ThreadView: kit.ViewThread(t), Messages: ms, NextCursor: next})
}

func (s *Server) handlePatchThread(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Read   *bool     `json:"read"`
		Folder *string   `json:"folder"`
		Labels *[]string `json:"labels"`
	}
	body, err := s.ReadBody(w, r)
	if err == nil {
		err = kit.DecodeStrict(body, &req)
	}
	var t *core.Thread
	if err == nil {
		t, err = s.Svc.ChangeThread(r.Context(), kit.APIKeyFrom(r.Context()), r.PathValue("id"),
			app.ThreadChange{Read: req.Read, Folder: req.Folder, Labels: req.Labels})
	}
	s.Answer(w, r, kit.Shown(t, err, kit.ViewThread), err)
}

// handleReplyReceived answers a received message: POST
// /v1/received/{id}/reply, idempotent like every send.
func (s *Server) handleReplyReceived(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (kit.WriteStep, error) {
	var req struct {
		kit.SendRequest
		ReplyAll bool `json:"reply_all"`
	}
	if err := kit.DecodeStrict(body, &req); err != nil {
		return nil, err
	}
	sr := req.ToApp(req.MailboxID) // every field of a send, scheduled_at included
	// An agent's reply outside the thread waits for a person
	// (received_agent.go).
	send, err := s.Svc.PrepareReply(ctx, key, idemKey, r.PathValue("id"), req.ReplyAll, app.Guarded(key, kit.AgentAsked(r)), sr)
	if err != nil {
		return nil, err
	}
	return s.AcceptStep(key, send, kit.NativeSendView), nil
}
