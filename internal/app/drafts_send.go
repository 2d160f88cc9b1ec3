package app

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
)

// Sending a draft, the one protocol of every door (the native route,
// Resend's inbox drafts route, the dashboard, MCP through the native
// route). Pressed twice, concurrently, by an agent and a person, on any
// door, it is one send:
//   - the Idempotency-Key is the draft's, fixed at creation, in one scope
//     for every door and every API key of the tenant (DraftScope): the
//     draft, not the caller, is the thing sent;
//   - the fingerprint is fixed too, so an edit between two presses is no
//     422 idempotency_key_reused: the first press sent what the draft said
//     then, and every later one gets that answer;
//   - a press that meets another one running waits for its answer
//     (draftWait) instead of answering 409, so that all of them get the
//     send's id;
//   - only a success is stored under the key, as the send's id (each door
//     shows the send its own way): a refusal (no recipient yet, a
//     guardrail) leaves the draft unsent, to be fixed and sent again under
//     the same key;
//   - the send marks the draft in its own transaction, against the version
//     of the content it read (AcceptDraftSend); a draft sent already
//     answers its send even after the key's record was purged;
//   - a door that answers with a view of the send (DraftView) stores its
//     first answer under a key of its own beside the draft's, so a retry
//     gets those bytes again (docs/api.md, "Idempotency"), not the send as
//     it is by then.

// draftWait bounds how long a press waits for a concurrent one's answer
// before it answers 409 idempotency_key_in_use like any key in use.
const (
	draftWait        = 10 * time.Second
	draftPollFirst   = 20 * time.Millisecond
	draftPollLongest = 250 * time.Millisecond
)

// DraftScope is the one scope the draft id of tenant is sent under.
func DraftScope(tenant, id string) idempotency.Scope {
	return idempotency.Scope{Tenant: tenant, Method: http.MethodPost, Route: "/v1/drafts/" + id + "/send", Key: DraftIdempotencyKey(id)}
}

// draftFingerprint is every press's fingerprint: the empty object's.
var draftFingerprint = func() string {
	fp, err := idempotency.Fingerprint([]byte("{}"))
	if err != nil {
		panic(err)
	}
	return fp
}()

// DraftSent is a press's answer: the send the draft became (SendID), or
// why there is none (Result: its Err, or the outcome InUse after
// draftWait).
type DraftSent struct {
	SendID string
	Result idempotency.Result
}

// DraftView is a door's answer to a press: its view of the send the draft
// became, as it is when first answered.
type DraftView func(*core.Send) (idempotency.Response, error)

// SendDraft sends the draft id of key's tenant once, on e (the process's
// engine), with guarded saying whether the agent rules apply (Guarded) and
// edit adding what the door's request carries (nil for nothing). With a
// view, the Result is the door's answer (its first, replayed byte for byte
// after): see draftViewKey.
func (s *Service) SendDraft(ctx context.Context, e *idempotency.Engine, key *core.APIKey, id string, guarded bool, edit func(*SendRequest) error, view DraftView) DraftSent {
	// Before the key: a key that may not see the draft must not get its
	// send replayed either.
	if _, err := s.Draft(ctx, key, id); err != nil {
		return DraftSent{Result: idempotency.Result{Err: err}}
	}
	sc := DraftScope(key.Tenant, id)
	w := idempotency.Write[core.Tx]{
		Scope: &sc, Fingerprint: draftFingerprint, InTx: s.InTx,
		Prepare: func(ctx context.Context) (idempotency.Step[core.Tx], error) {
			ds, err := s.PrepareDraftSend(ctx, key, id, guarded, edit)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, tx core.Tx) (idempotency.Response, error) {
				send, err := s.AcceptDraftSend(ctx, tx, key, ds)
				if err != nil {
					return idempotency.Response{}, err
				}
				b, err := json.Marshal(draftAnswer{ID: send.ID})
				return idempotency.Response{Status: http.StatusOK, ContentType: "application/json", Body: b}, err
			}, nil
		},
		// No refusal is the key's answer: it is answered, not stored.
		Refuse: func(error) (idempotency.Response, bool) { return idempotency.Response{}, false },
	}
	ran := runWaiting(ctx, e, w)
	out := DraftSent{Result: ran}
	if ran.Err == nil && ran.Response != nil {
		var a draftAnswer
		if err := json.Unmarshal(ran.Response.Body, &a); err != nil || a.ID == "" {
			out.Result.Err = core.Errorf(core.CodeInternal, "", "the draft's stored answer is unreadable")
		}
		out.SendID = a.ID
	}
	if out.Result.Err != nil || out.SendID == "" || view == nil {
		return out
	}
	answered := s.answerDraft(ctx, e, key.Tenant, id, out.SendID, view)
	if ran.Outcome == idempotency.Replay && answered.Outcome == idempotency.Proceed {
		// The send was made before (a press whose answer was never
		// stored: the process stopped between the two): still a replay.
		answered.Outcome = idempotency.Replay
	}
	out.Result = answered
	return out
}

// draftViewKey is the key a door's first answer to a press of draft id is
// stored under, in the draft's scope: every door that answers with a view
// answers with the same one (the send's), so one record serves them.
func draftViewKey(id string) string { return DraftIdempotencyKey(id) + " view" }

// answerDraft is the door's answer to a press of draft id, which became
// send sendID: the first one stored, else view's of the send as it is now,
// stored. It runs after the send's own transaction, so a retry of a press
// whose answer was lost gets the bytes the first press answered.
func (s *Service) answerDraft(ctx context.Context, e *idempotency.Engine, tenant, id, sendID string, view DraftView) idempotency.Result {
	sc := DraftScope(tenant, id)
	sc.Key = draftViewKey(id)
	return runWaiting(ctx, e, idempotency.Write[core.Tx]{
		Scope: &sc, Fingerprint: draftFingerprint, InTx: s.InTx,
		Prepare: func(context.Context) (idempotency.Step[core.Tx], error) {
			return func(ctx context.Context, tx core.Tx) (idempotency.Response, error) {
				send, err := tx.SendForUpdateIn(ctx, sendID) // a plain read: holds nothing
				if err != nil {
					return idempotency.Response{}, err
				}
				return view(send)
			}, nil
		},
		Refuse: func(error) (idempotency.Response, bool) { return idempotency.Response{}, false },
	})
}

// draftAnswer is what a draft's key stores: the send it became.
type draftAnswer struct {
	ID string `json:"id"`
}

// runWaiting runs w, and again while another press of the same draft
// holds its key, until draftWait has passed.
func runWaiting(ctx context.Context, e *idempotency.Engine, w idempotency.Write[core.Tx]) idempotency.Result {
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
		pause = min(2*pause, draftPollLongest)
	}
}
