package httpapi

import (
	"net/http"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// Sending a draft: POST /v1/drafts/{id}/send and Resend's
// POST /inboxes/{inbox}/drafts/{id}/send, both app.Service.SendDraft (the
// one protocol: one key and scope per draft, whoever presses, on whatever
// door). The answer is the send as it is now, which every press, the
// first and the replayed ones, shows the same way.

// draftSendInput reads a surface's send request: the draft's id and what
// the body adds to the send (nil for nothing).
type draftSendInput func(r *http.Request, body []byte) (id string, edit func(*app.SendRequest) error, err error)

// sendDraft is the send route of a surface, in its error style (o.errs).
func (s *Server) sendDraft(o postOpts, in draftSendInput) http.Handler {
	o.audit = true
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := apiKeyFrom(r.Context())
		intent, err := intentFrom(r.Header)
		var res result
		if err != nil {
			res = s.refusal(r, o, err)
		} else {
			res = s.runDraftSend(w, r, o, in)
		}
		s.respond(w, res)
		s.observe(o, res)
		if key.Agent || intent != "" || err != nil {
			s.writeAudit(r, key, intent, res)
		}
	})
}

func (s *Server) runDraftSend(w http.ResponseWriter, r *http.Request, o postOpts, in draftSendInput) result {
	ctx := r.Context()
	key := apiKeyFrom(ctx)
	body, err := s.readBody(w, r)
	var (
		id   string
		edit func(*app.SendRequest) error
	)
	if err == nil {
		id, edit, err = in(r, body)
	}
	if err != nil {
		return s.refusal(r, o, err)
	}
	sent := s.svc.SendDraft(ctx, s.idem, key, id, app.Guarded(key, agentAsked(r)), edit)
	ran := sent.Result
	var send *core.Send
	if ran.Err == nil && sent.SendID != "" {
		if send, err = s.reads.Send(ctx, key.Tenant, sent.SendID); err != nil {
			ran.Err = err
		}
	}
	if ran.Err != nil || send == nil {
		res := s.resultOf(r, o, ran, result{})
		res.idemKey = app.DraftIdempotencyKey(id)
		return res
	}
	res := result{status: http.StatusOK, body: marshal(viewSend(send)), outcome: ran.Outcome, stored: ran.Stored,
		sendIDs: []string{send.ID}, idemKey: app.DraftIdempotencyKey(id)}
	return res
}

// handleNativeDraftSend reads POST /v1/drafts/{id}/send: no body, or {}.
func handleNativeDraftSend(r *http.Request, body []byte) (string, func(*app.SendRequest) error, error) {
	if len(body) > 0 {
		var empty struct{}
		if err := decodeStrict(body, &empty); err != nil {
			return "", nil, err
		}
	}
	return r.PathValue("id"), nil, nil
}
