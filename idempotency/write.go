package idempotency

import (
	"context"
	"errors"
)

// Write is one idempotent write on a transactional engine: the protocol
// every door of sendonce (HTTP, SMTP submission) runs, so that a key is
// decided, the work done, its answer stored and the transaction committed
// in one place, the same way. Tx is the caller's transaction, which holds
// the key's record (TxRecords) beside the caller's own rows.
type Write[Tx TxRecords] struct {
	// Scope names the key; nil for a request without one, which runs and
	// stores nothing.
	Scope *Scope
	// Fingerprint is the request's identity under its key.
	Fingerprint string
	// InTx runs fn in one transaction of the caller's store and commits it
	// when fn returns nil. It may run fn more than once (a group commit
	// reruns a batch, a deadlock's victim runs again): fn starts from
	// nothing each time.
	InTx func(ctx context.Context, fn func(tx Tx) error) error
	// Prepare runs once the key lets the request proceed, outside any
	// transaction — parsing, validating, rendering: the CPU work, which
	// concurrent requests do in parallel — and returns the step that
	// writes in the transaction. An error is handed to Refuse.
	Prepare func(ctx context.Context) (Step[Tx], error)
	// Earlier, when set, is asked once the replay cache has no answer and
	// before the key is decided: the answer a retry gets from a record of
	// the same request stored under another scope — a form an older
	// version used for the key, within the window after an upgrade in
	// which such records live. A response is replayed as the key's; nil
	// lets the key be decided as usual; an error stops the request.
	Earlier func(ctx context.Context) (*Response, error)
	// Refuse turns an error of Prepare or of the step into the answer that
	// refuses the request, and reports whether it is one. An error that is
	// not an answer (an internal failure, a conflict the transaction runs
	// again) is false: it rolls back, nothing is stored, and Result.Err
	// carries it. A refusal rolls back the step's writes and is stored
	// alone as the key's answer when ShouldStore says so: "all or none"
	// holds for what the answer says.
	Refuse func(err error) (Response, bool)
}

// Step writes a request's work inside the transaction and returns its
// answer, stored as the key's when ShouldStore says so.
type Step[Tx TxRecords] func(ctx context.Context, tx Tx) (Response, error)

// Result is what one Write answered.
type Result struct {
	// Outcome is Proceed when the request ran (with or without a key);
	// Replay, InUse or Mismatch when the key decided it; zero when Err
	// stopped the request before its key was decided (check Err first).
	Outcome Outcome
	// Response is the answer: the step's, the refusal's, or the stored one
	// replayed. Nil for InUse, Mismatch and an Err that is not a refusal.
	Response *Response
	// Stored reports that Response committed, as the key's answer when
	// there is a key.
	Stored bool
	// Err is the error behind a refusal (Refused), or the failure that
	// stopped the write with nothing stored: the caller answers it as a
	// temporary failure, and a retry runs afresh.
	Err error
	// Refused reports that Response refuses the request (Err says why).
	Refused bool
}

// Ends of a transaction in which nothing may commit.
var (
	errDecided   = errors.New("idempotency: key decided in the transaction")
	errRefused   = errors.New("idempotency: step refused")
	errNotStored = errors.New("idempotency: answer is not to be stored")
)

// Run runs w on e: the replay cache, Earlier, Begin (the other cheap
// tiers: requests running here, the front store, the lock-free lookup),
// Prepare, then one transaction that decides the key, runs the step and
// stores its answer, then Committed — or Release on every other way out,
// panics included.
func Run[Tx TxRecords](ctx context.Context, e *Engine, w Write[Tx]) Result {
	var t *Ticket
	if w.Scope != nil {
		if d, ok := e.Cached(*w.Scope, w.Fingerprint); ok {
			return decidedResult(d) // before the older forms are looked at
		}
		if w.Earlier != nil {
			resp, err := w.Earlier(ctx)
			if err != nil {
				return Result{Err: err}
			}
			if resp != nil {
				return decidedResult(Decision{Outcome: Replay, Response: resp})
			}
		}
		var err error
		if t, err = e.Begin(ctx, *w.Scope, w.Fingerprint); err != nil {
			return Result{Err: err}
		}
		if t.Decision.Outcome != Proceed {
			return decidedResult(t.Decision)
		}
	}
	r := runner[Tx]{w: w, t: t}
	defer func() {
		if !r.committed {
			t.release(ctx) // also on a panic: the ticket must not outlive the request
		}
	}()
	step, err := w.Prepare(ctx)
	if err != nil {
		return r.refuse(ctx, err)
	}
	return r.write(ctx, step)
}

// runner is one Run past Begin.
type runner[Tx TxRecords] struct {
	w         Write[Tx]
	t         *Ticket
	decided   Decision // what a transaction found another request decided
	committed bool
}

// write runs the step and stores its answer in one transaction.
func (r *runner[Tx]) write(ctx context.Context, step Step[Tx]) Result {
	var out Result
	err := r.w.InTx(r.hinted(ctx), func(tx Tx) error {
		out = Result{Outcome: Proceed}
		if err := r.decide(ctx, tx); err != nil {
			return err
		}
		resp, err := step(ctx, tx)
		if err != nil {
			refusal, ok := r.w.Refuse(err)
			if !ok {
				return err // internal, or a conflict the transaction runs again
			}
			out.Response, out.Err, out.Refused = &refusal, err, true
			return errRefused
		}
		out.Response = &resp
		if !ShouldStore(resp.Status) {
			return errNotStored
		}
		if r.t != nil {
			return r.t.Put(ctx, tx, resp)
		}
		return nil
	})
	switch {
	case errors.Is(err, errRefused):
		return r.storeAlone(ctx, out)
	case errors.Is(err, errNotStored):
		return out
	}
	return r.end(ctx, err, out)
}

// hinted tells the store which key the transaction decides first
// (DecisionHint).
func (r *runner[Tx]) hinted(ctx context.Context) context.Context {
	if r.t == nil {
		return ctx
	}
	return WithDecisionHint(ctx, r.t.scope)
}

// decide confirms the key inside tx (may run more than once: the
// transaction's function starts from nothing each time); errDecided when
// another request decided it, its decision kept.
func (r *runner[Tx]) decide(ctx context.Context, tx Tx) error {
	r.decided = Decision{}
	if r.t == nil {
		return nil
	}
	d, err := r.t.Decide(ctx, tx)
	if err != nil {
		return err
	}
	if d.Outcome != Proceed {
		r.decided = d
		return errDecided
	}
	return nil
}

// end is the Result of a transaction that ended with err: out stored and
// the ticket committed, the decision another request made, or a failure.
func (r *runner[Tx]) end(ctx context.Context, err error, out Result) Result {
	switch {
	case err == nil:
		out.Stored = true
		r.commit(ctx)
		return out
	case errors.Is(err, errDecided):
		return decidedResult(r.decided)
	}
	return Result{Outcome: Proceed, Err: err}
}

// refuse answers an error of Prepare: a refusal is stored alone, anything
// else is a failure with nothing stored.
func (r *runner[Tx]) refuse(ctx context.Context, err error) Result {
	refusal, ok := r.w.Refuse(err)
	if !ok {
		return Result{Outcome: Proceed, Err: err}
	}
	return r.storeAlone(ctx, Result{Outcome: Proceed, Response: &refusal, Err: err, Refused: true})
}

// storeAlone stores a refusal that wrote nothing as the key's answer, in a
// transaction of its own. A refusal that is not to be stored (or has no
// key) is answered as it is.
func (r *runner[Tx]) storeAlone(ctx context.Context, out Result) Result {
	if r.t == nil || !ShouldStore(out.Response.Status) {
		return out
	}
	err := r.w.InTx(r.hinted(ctx), func(tx Tx) error {
		if err := r.decide(ctx, tx); err != nil {
			return err
		}
		return r.t.Put(ctx, tx, *out.Response)
	})
	return r.end(ctx, err, out)
}

func (r *runner[Tx]) commit(ctx context.Context) {
	r.committed = true
	if r.t != nil {
		r.t.Committed(ctx, nil)
	}
}

// decidedResult is the answer of a key decided without running the request.
func decidedResult(d Decision) Result {
	return Result{Outcome: d.Outcome, Response: d.Response}
}
