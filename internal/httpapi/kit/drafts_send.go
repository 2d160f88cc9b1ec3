package kit

import (
	"net/http"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// Sending a draft: POST /v1/drafts/{id}/send and Resend's
// POST /inboxes/{inbox}/drafts/{id}/send, both app.Service.SendDraft (the
// one protocol: one key and scope per draft, whoever presses, on whatever
// door). The answer is the send as it is now, which every press, the
// first and the replayed ones, shows the same way.

// DraftSendInput reads a surface's send request: the draft's id and what
// the body adds to the send (nil for nothing).
type DraftSendInput func(r *http.Request, body []byte) (id string, edit func(*app.SendRequest) error, err error)

// SendDraft is the send route of a surface, in its error style (o.Errs).
func (s *Base) SendDraft(o PostOpts, in DraftSendInput) http.Handler {
	o.Audit = true
	return s.answered(o, func(w http.ResponseWriter, r *http.Request) Result { return s.runDraftSend(w, r, o, in) })
}

func (s *Base) runDraftSend(w http.ResponseWriter, r *http.Request, o PostOpts, in DraftSendInput) Result {
	ctx := r.Context()
	key := APIKeyFrom(ctx)
	body, err := s.ReadBody(w, r)
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
	sent := s.Svc.SendDraft(ctx, s.Idem, key, id, app.Guarded(key, AgentAsked(r)), edit, viewDraftSend)
	res := s.resultOf(r, o, sent.Result, Result{})
	res.idemKey = app.DraftIdempotencyKey(id)
	if sent.SendID != "" && res.status == http.StatusOK {
		res.sendIDs = []string{sent.SendID}
	}
	return res
}

// viewDraftSend is both surfaces' answer to a press: the send, as the
// native routes show it.
func viewDraftSend(send *core.Send) (idempotency.Response, error) {
	return idempotency.Response{Status: http.StatusOK, ContentType: "application/json", Body: Marshal(ViewSend(send))}, nil
}
