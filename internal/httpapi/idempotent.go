package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
)

// txHandler does a POST's work in two steps. The first runs outside any
// transaction — parsing, validating, rendering: the CPU work, which
// concurrent requests do in parallel — and returns the second, which runs
// inside the transaction that also reserves the key and stores the
// response (on SQLite one shared, group-committed transaction, so the step
// must only write). An error from either step is turned into the API's
// error response; a 5xx rolls everything back.
type txHandler func(ctx context.Context, key *core.APIKey, r *http.Request, body []byte) (writeStep, error)

type writeStep func(ctx context.Context, tx core.Tx) (status int, v any, err error)

// inTx is a txHandler whose work all happens in the transaction (the
// admin routes: small, and reading what they change).
func inTx(h func(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (int, any, error)) txHandler {
	return func(ctx context.Context, key *core.APIKey, r *http.Request, body []byte) (writeStep, error) {
		return func(ctx context.Context, tx core.Tx) (int, any, error) { return h(ctx, tx, key, r, body) }, nil
	}
}

// postOpts says how one POST route treats the Idempotency-Key.
type postOpts struct {
	// requireKey refuses requests without a key (POST /v1/send, when
	// configured).
	requireKey bool
	// emptyBody allows a request without a body (approve, reject).
	emptyBody bool
	// committed runs after a 2xx response committed (metrics).
	committed func()
	// maxKeyLen is the longest Idempotency-Key the route accepts. Defaults
	// to idempotency.MaxKeyLen (the native API's 255).
	maxKeyLen int
	// errs writes the route's errors in its style's shape (Resend's on
	// /emails). Defaults to the native error body.
	errs errorStyle
	// audit writes the request of an agent key, or one carrying an
	// intent, to the audit log with its result (the send routes).
	audit bool
}

// errorStyle turns an error (a *core.Error with a native code, or any
// other, internal one) into a route style's status and body.
type errorStyle func(r *http.Request, logger *slog.Logger, err error) (int, any)

// nativeErrors is the error body of /v1: errorResponse.
func nativeErrors(r *http.Request, logger *slog.Logger, err error) (int, any) {
	return errorResponse(r, logger, err)
}

func (o postOpts) keyLen() int {
	if o.maxKeyLen > 0 {
		return o.maxKeyLen
	}
	return idempotency.MaxKeyLen
}

func (o postOpts) style() errorStyle {
	if o.errs == nil {
		return nativeErrors
	}
	return o.errs
}

// emptyFingerprint is what a body-less request on a route whose body is
// optional counts as: the empty object, so that no body and {} are the same
// request.
var emptyFingerprint = func() string {
	fp, err := idempotency.Fingerprint([]byte("{}"))
	if err != nil {
		panic(err)
	}
	return fp
}()

// idempotent wraps a POST handler with the rules of docs/api.md,
// "Idempotency", on the server's idempotency engine: the stored response
// commits in the handler's own transaction. What was answered is one typed
// result, which the audit log and the metrics take as it is.
func (s *Server) idempotent(o postOpts, h txHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := apiKeyFrom(r.Context())
		intent, ierr := "", error(nil)
		if o.audit {
			intent, ierr = intentFrom(r.Header)
		}
		var res result
		if ierr != nil {
			res = s.refusal(r, o, ierr)
		} else {
			res = s.decideAndRun(w, r, o, h)
		}
		s.respond(w, res)
		s.observe(o, res)
		if o.audit && (key.Agent || intent != "" || ierr != nil) {
			s.writeAudit(r, key, intent, res)
		}
	})
}

// decideAndRun reads and fingerprints the request, asks the engine, and
// runs the handler when the key (or its absence) lets it.
func (s *Server) decideAndRun(w http.ResponseWriter, r *http.Request, o postOpts, h txHandler) result {
	ctx := r.Context()
	key := apiKeyFrom(ctx)
	body, err := s.readBody(w, r)
	if err != nil {
		return s.refusal(r, o, err)
	}
	idemKey, present, err := idempotency.KeyFromHeader(r.Header, o.keyLen())
	if err != nil {
		return s.refusal(r, o, apiError(codeKeyInvalid, "Idempotency-Key", fmt.Sprintf(
			"Idempotency-Key must be 1 to %d visible ASCII characters (0x21-0x7E), or a quoted structured-field string of them", o.keyLen())))
	}
	if !present && o.requireKey {
		return s.refusal(r, o, apiError(codeKeyRequired, "Idempotency-Key",
			"this route needs an Idempotency-Key header: make one per logical send (a UUID), store it, and reuse it on every retry"))
	}
	fp := emptyFingerprint
	if len(body) > 0 || !o.emptyBody {
		if fp, err = s.fp.Fingerprint(body); err != nil {
			return s.refusal(r, o, apiError(core.CodeInvalidJSON, "", "the request body is not valid JSON"))
		}
	}
	if !present {
		return s.runTx(r, key, body, h, nil, o)
	}
	r = r.WithContext(context.WithValue(ctx, idemKeyCtx, idemKey))
	sc := idempotency.Scope{Tenant: key.Tenant, Method: r.Method, Route: r.URL.Path, Key: idemKey}
	var res result
	if t, err := s.idem.Begin(ctx, sc, fp); err != nil {
		res = s.refusal(r, o, err)
	} else if t.Decision.Outcome != idempotency.Proceed {
		res = s.decided(r, o, t.Decision)
	} else {
		res = s.runTx(r, key, body, h, t, o)
	}
	res.idemKey = idemKey
	return res
}

const idemKeyCtx ctxKey = 2

// idemKeyFrom returns the request's parsed Idempotency-Key, "" when none.
func idemKeyFrom(ctx context.Context) string {
	k, _ := ctx.Value(idemKeyCtx).(string)
	return k
}

// Ends of a transaction in which nothing may commit.
var (
	errDecided   = errors.New("idempotency key decided")      // found completed, in flight or reused
	errRefused   = errors.New("write step refused")           // the handler's error: its writes roll back
	errNotStored = errors.New("response is not to be stored") // a status the contract does not store
)

// runTx runs h's first step, then, in one transaction, decides the key
// (when there is one), runs h's write step and stores its response. A
// response that is not stored rolls it all back, so a retry runs afresh.
// A refusal of the write step (a 4xx after some writes, say the tenth
// email of a batch) rolls back its writes and is stored alone: "all or
// none" holds for what the key's answer says.
func (s *Server) runTx(r *http.Request, key *core.APIKey, body []byte, h txHandler, t *idempotency.Ticket, o postOpts) result {
	ctx := r.Context()
	committed := false
	defer func() {
		if !committed && t != nil {
			// Also when the handler panicked: the ticket must not outlive
			// this request.
			t.Release(ctx)
		}
	}()
	write, perr := h(ctx, key, r, body)
	if perr != nil {
		out := s.refusal(r, o, perr)
		committed = s.storeAlone(r, o, t, &out)
		return out
	}
	var (
		out     result
		decided idempotency.Decision
	)
	err := s.store.InTx(ctx, func(tx core.Tx) error {
		// May run more than once (group commit reruns a batch): start
		// from nothing each time.
		out, decided = result{}, idempotency.Decision{}
		if t != nil {
			d, err := t.Decide(ctx, tx)
			if err != nil {
				return err
			}
			if d.Outcome != idempotency.Proceed {
				decided = d
				return errDecided
			}
		}
		status, v, herr := write(ctx, tx)
		if core.IsConflicted(herr) {
			// Met another transaction (a deadlock): not an answer. The
			// group commit runs the batch again.
			return herr
		}
		if herr != nil {
			out = s.refusal(r, o, herr)
			return errRefused
		}
		out = result{status: status, body: marshal(v), outcome: idempotency.Proceed, sendIDs: sendIDsOf(v)}
		if !idempotency.ShouldStore(status) {
			return errNotStored
		}
		if t != nil {
			return t.Put(ctx, tx, out.response())
		}
		return nil
	})
	switch {
	case err == nil:
		out.stored, committed = true, true
		if t != nil {
			t.Committed(ctx, nil)
		}
		return out
	case errors.Is(err, errDecided):
		return s.decided(r, o, decided)
	case errors.Is(err, errRefused):
		committed = s.storeAlone(r, o, t, &out)
		return out
	case errors.Is(err, errNotStored):
		return out
	}
	return s.refusal(r, o, err)
}

// storeAlone stores a refusal that wrote nothing as the key's answer, in a
// transaction of its own, and reports whether it committed. A refusal that
// is not to be stored (or has no key) is left as it is.
func (s *Server) storeAlone(r *http.Request, o postOpts, t *idempotency.Ticket, out *result) bool {
	if t == nil || !idempotency.ShouldStore(out.status) {
		return false
	}
	ctx := r.Context()
	var decided idempotency.Decision
	err := s.store.InTx(ctx, func(tx core.Tx) error {
		d, err := t.Decide(ctx, tx)
		if err != nil {
			return err
		}
		if decided = d; d.Outcome != idempotency.Proceed {
			return errDecided
		}
		return t.Put(ctx, tx, out.response())
	})
	switch {
	case err == nil:
		out.stored = true
		t.Committed(ctx, nil)
		return true
	case errors.Is(err, errDecided):
		*out = s.decided(r, o, decided)
	default:
		*out = s.refusal(r, o, err)
	}
	return false
}
