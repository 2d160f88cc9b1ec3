package httpapi

import (
	"context"
	"net/http"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// The native drafts routes (docs/api.md, "Drafts"; docs/agents.md,
// "Drafts"). Sending one is drafts_send.go.

// draftBody is POST /v1/drafts: the fields of POST /v1/send, or a reply
// to the received message in_reply_to names.
type draftBody struct {
	kit.SendRequest
	InReplyTo string `json:"in_reply_to"`
	ReplyAll  bool   `json:"reply_all"`
}

func (s *Server) handleCreateDraft(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, _ string) (kit.WriteStep, error) {
	var req draftBody
	if err := kit.DecodeStrict(body, &req); err != nil {
		return nil, err
	}
	if err := kit.CheckRecipientCounts(req.To, req.Cc, req.Bcc, req.ReplyTo); err != nil {
		return nil, err
	}
	if req.ReplyAll && req.InReplyTo == "" {
		return nil, core.Errorf(core.CodeValidation, "reply_all", "reply_all needs in_reply_to")
	}
	d, err := s.Svc.PrepareDraft(ctx, key, app.DraftRequest{Send: req.ToApp(req.MailboxID), ReplyToID: req.InReplyTo, ReplyAll: req.ReplyAll})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx core.Tx) (int, any, error) {
		if err := s.Svc.AcceptDraft(ctx, tx, d); err != nil {
			return 0, nil, err
		}
		v, err := viewDraft(d)
		return http.StatusOK, v, err
	}, nil
}

func (s *Server) handleListDrafts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := kit.ParseLimit(q.Get("limit"))
	var (
		ds   []*core.Draft
		more bool
	)
	if err == nil {
		ds, more, err = s.Svc.ListDrafts(r.Context(), kit.APIKeyFrom(r.Context()), "", limit, q.Get("after"))
	}
	out := kit.ListView[*draftView]{Object: "list"}
	if err == nil {
		out.Data, err = kit.TryViews(ds, viewDraft)
	}
	if err == nil && more {
		out.Next = kit.OptString(ds[len(ds)-1].ID)
	}
	s.Answer(w, r, out, err)
}

func (s *Server) handleGetDraft(w http.ResponseWriter, r *http.Request) {
	d, err := s.Svc.Draft(r.Context(), kit.APIKeyFrom(r.Context()), r.PathValue("id"))
	var v *draftView
	if err == nil {
		v, err = viewDraft(d)
	}
	s.Answer(w, r, v, err)
}

// handlePatchDraft changes the fields the body names (null clears one)
// while the draft is unsent: 409 invalid_state once it was sent.
func (s *Server) handlePatchDraft(w http.ResponseWriter, r *http.Request) {
	body, err := s.ReadBody(w, r)
	var edit func(*app.SendRequest) error
	if err == nil {
		edit, err = nativeDraftEdit(body)
	}
	var d *core.Draft
	if err == nil {
		d, err = s.Svc.UpdateDraft(r.Context(), kit.APIKeyFrom(r.Context()), r.PathValue("id"), edit)
	}
	var v *draftView
	if err == nil {
		v, err = viewDraft(d)
	}
	s.Answer(w, r, v, err)
}

// nativeDraftEdit reads a PATCH body: the fields of POST /v1/send, each
// changed only when the body has it.
func nativeDraftEdit(body []byte) (func(*app.SendRequest) error, error) {
	var req kit.SendRequest
	present, err := kit.DecodePatch(body, &req)
	if err != nil {
		return nil, err
	}
	if err := kit.CheckRecipientCounts(req.To, req.Cc, req.Bcc, req.ReplyTo); err != nil {
		return nil, err
	}
	in := req.ToApp(req.MailboxID)
	return func(r *app.SendRequest) error {
		for name := range present {
			kit.PatchSendField(name, in, r)
		}
		return nil
	}, nil
}

func (s *Server) handleDeleteDraft(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	err := s.Svc.DeleteDraft(r.Context(), kit.APIKeyFrom(r.Context()), id)
	s.Answer(w, r, map[string]any{"id": id, "object": "draft", "deleted": true}, err)
}

// handleNativeDraftSend reads POST /v1/drafts/{id}/send: no body, or {}.
func handleNativeDraftSend(r *http.Request, body []byte) (string, func(*app.SendRequest) error, error) {
	if len(body) > 0 {
		var empty struct{}
		if err := kit.DecodeStrict(body, &empty); err != nil {
			return "", nil, err
		}
	}
	return r.PathValue("id"), nil, nil
}
