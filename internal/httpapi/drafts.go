package httpapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// The native drafts routes (docs/api.md, "Drafts"; docs/agents.md,
// "Drafts"). Sending one is drafts_send.go.

// draftBody is POST /v1/drafts: the fields of POST /v1/send, or a reply
// to the received message in_reply_to names.
type draftBody struct {
	sendRequest
	InReplyTo string `json:"in_reply_to"`
	ReplyAll  bool   `json:"reply_all"`
}

func (s *Server) handleCreateDraft(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, _ string) (writeStep, error) {
	var req draftBody
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if err := checkRecipientCounts(req.To, req.Cc, req.Bcc, req.ReplyTo); err != nil {
		return nil, err
	}
	if req.ReplyAll && req.InReplyTo == "" {
		return nil, core.Errorf(core.CodeValidation, "reply_all", "reply_all needs in_reply_to")
	}
	d, err := s.svc.PrepareDraft(ctx, key, app.DraftRequest{Send: req.toApp(req.MailboxID), ReplyToID: req.InReplyTo, ReplyAll: req.ReplyAll})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx core.Tx) (int, any, error) {
		if err := s.svc.AcceptDraft(ctx, tx, d); err != nil {
			return 0, nil, err
		}
		v, err := viewDraft(d)
		return http.StatusOK, v, err
	}, nil
}

func (s *Server) handleListDrafts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := parseLimit(q.Get("limit"))
	var (
		ds   []*core.Draft
		more bool
	)
	if err == nil {
		ds, more, err = s.svc.ListDrafts(r.Context(), apiKeyFrom(r.Context()), "", limit, q.Get("after"))
	}
	out := listView[*draftView]{Object: "list", Data: make([]*draftView, 0, len(ds))}
	for _, d := range ds {
		if err != nil {
			break
		}
		var v *draftView
		if v, err = viewDraft(d); err == nil {
			out.Data = append(out.Data, v)
		}
	}
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	if more {
		out.Next = optString(ds[len(ds)-1].ID)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleGetDraft(w http.ResponseWriter, r *http.Request) {
	d, err := s.svc.Draft(r.Context(), apiKeyFrom(r.Context()), r.PathValue("id"))
	var v *draftView
	if err == nil {
		v, err = viewDraft(d)
	}
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// handlePatchDraft changes the fields the body names (null clears one)
// while the draft is unsent: 409 invalid_state once it was sent.
func (s *Server) handlePatchDraft(w http.ResponseWriter, r *http.Request) {
	body, err := s.readBody(w, r)
	var edit func(*app.SendRequest) error
	if err == nil {
		edit, err = nativeDraftEdit(body)
	}
	var d *core.Draft
	if err == nil {
		d, err = s.svc.UpdateDraft(r.Context(), apiKeyFrom(r.Context()), r.PathValue("id"), edit)
	}
	var v *draftView
	if err == nil {
		v, err = viewDraft(d)
	}
	if err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// nativeDraftEdit reads a PATCH body: the fields of POST /v1/send, each
// changed only when the body has it.
func nativeDraftEdit(body []byte) (func(*app.SendRequest) error, error) {
	var (
		req     sendRequest
		present map[string]json.RawMessage
	)
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, &present); err != nil || present == nil {
		return nil, apiError(core.CodeInvalidJSON, "", "the request body must be a JSON object")
	}
	if err := checkRecipientCounts(req.To, req.Cc, req.Bcc, req.ReplyTo); err != nil {
		return nil, err
	}
	in := req.toApp(req.MailboxID)
	return func(r *app.SendRequest) error {
		for name := range present {
			patchField(name, in, r)
		}
		return nil
	}, nil
}

// patchField copies the field the native body calls name from in to r.
func patchField(name string, in, r *app.SendRequest) {
	switch name {
	case "to":
		r.To = in.To
	case "cc":
		r.Cc = in.Cc
	case "bcc":
		r.Bcc = in.Bcc
	case "reply_to":
		r.ReplyTo = in.ReplyTo
	case "from":
		r.From = in.From
	case "mailbox_id":
		r.MailboxID = in.MailboxID
	case "subject":
		r.Subject = in.Subject
	case "text":
		r.Text = in.Text
	case "html":
		r.HTML = in.HTML
	case "template_id":
		r.TemplateID = in.TemplateID
	case "variables":
		r.Variables = in.Variables
	case "headers":
		r.Headers = in.Headers
	case "tags":
		r.Tags = in.Tags
	case "attachments":
		r.Attachments = in.Attachments
	case "scheduled_at":
		r.ScheduledAt = in.ScheduledAt
	case "stream":
		r.Stream = in.Stream
	case "unsubscribe":
		r.Unsubscribe = in.Unsubscribe
	}
}

func (s *Server) handleDeleteDraft(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.svc.DeleteDraft(r.Context(), apiKeyFrom(r.Context()), id); err != nil {
		writeError(w, r, s.logger, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "draft", "deleted": true})
}
