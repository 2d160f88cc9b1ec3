package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// Sending a draft: POST /v1/drafts/{id}/send and Resend's
// POST /inboxes/{inbox}/drafts/{id}/send. Pressed twice, concurrently, by
// an agent and a person, on either surface, it is one send:
//   - the Idempotency-Key is the draft's, fixed at creation, whatever
//     header the request carries; its scope is the same on both surfaces
//     and for every API key of the tenant (the draft, not the caller, is
//     the thing sent);
//   - the fingerprint is fixed too, so an edit between two presses is no
//     422 idempotency_key_reused: the first press sent what the draft said
//     then, and every later one gets that answer;
//   - a press that meets another one running waits for its answer
//     (draftWait) instead of answering 409, so that all of them get the
//     send's id;
//   - only a success is stored under the key: a refusal (the draft has no
//     recipient yet, a guardrail) leaves the draft unsent, to be edited
//     and sent again under the same key;
//   - the send marks the draft in its own transaction, against the version
//     of the content it read; a draft already sent answers its send even
//     after the key's record was purged.

// draftWait bounds how long a press waits for a concurrent one's answer
// before it answers 409 idempotency_key_in_use like any key in use.
const (
	draftWait       = 10 * time.Second
	draftPollFirst  = 20 * time.Millisecond
	draftPollLongst = 250 * time.Millisecond
)

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

// draftScope is the one scope a draft is sent under.
func draftScope(tenant, id string) idempotency.Scope {
	return idempotency.Scope{Tenant: tenant, Method: http.MethodPost, Route: "/v1/drafts/" + id + "/send", Key: app.DraftIdempotencyKey(id)}
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
	if err == nil {
		// Before the key: a key that may not see the draft must not get
		// its send replayed either.
		_, err = s.svc.Draft(ctx, key, id)
	}
	if err != nil {
		return s.refusal(r, o, err)
	}
	sc := draftScope(key.Tenant, id)
	var sendIDs []string
	w8 := idempotency.Write[core.Tx]{
		Scope: &sc, Fingerprint: emptyFingerprint, InTx: s.svc.InTx,
		Prepare: func(ctx context.Context) (idempotency.Step[core.Tx], error) {
			ds, err := s.svc.PrepareDraftSend(ctx, key, id, app.Guarded(key, agentAsked(r)), edit)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, tx core.Tx) (idempotency.Response, error) {
				send, err := s.svc.AcceptDraftSend(ctx, tx, key, ds)
				if err != nil {
					return idempotency.Response{}, err
				}
				sendIDs = []string{send.ID}
				return idempotency.Response{Status: http.StatusOK, ContentType: "application/json", Body: marshal(viewSend(send))}, nil
			}, nil
		},
		// No refusal is the key's answer: it is answered, not stored, and
		// the draft can be fixed and sent again under the same key.
		Refuse: func(error) (idempotency.Response, bool) { return idempotency.Response{}, false },
	}
	ran := waitDraftSend(ctx, s.idem, w8)
	res := s.resultOf(r, o, ran, result{})
	if ran.Outcome == idempotency.Proceed && ran.Err == nil {
		res.sendIDs = sendIDs
	}
	res.idemKey = sc.Key
	return res
}

// waitDraftSend runs w, and again while another press of the same draft
// holds its key, until draftWait has passed.
func waitDraftSend(ctx context.Context, e *idempotency.Engine, w idempotency.Write[core.Tx]) idempotency.Result {
	deadline := time.Now().Add(draftWait)
	pause := draftPollFirst
	for {
		ran := idempotency.Run(ctx, e, w)
		if ran.Outcome != idempotency.InUse || time.Now().Add(pause).After(deadline) {
			return ran
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ran
		case <-t.C:
		}
		pause = min(2*pause, draftPollLongst)
	}
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
