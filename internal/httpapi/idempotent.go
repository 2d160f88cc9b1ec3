package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

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

func (o postOpts) writeError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	status, body := o.style()(r, logger, err)
	writeJSON(w, status, body)
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

// rollback carries a response that must not commit.
type rollback struct {
	status int
	body   []byte
}

func (rollback) Error() string { return "rolled back" }

// idempotent wraps a POST handler with the rules of the API contract,
// section 3. The stored response commits in the handler's own transaction.
func (s *Server) idempotent(o postOpts, h txHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		key := apiKeyFrom(ctx)
		body, err := s.readBody(w, r)
		if err != nil {
			o.writeError(w, r, s.logger, err)
			return
		}
		idemKey, present, err := idempotency.KeyFromHeader(r.Header, o.keyLen())
		if err != nil {
			o.writeError(w, r, s.logger, apiError(codeKeyInvalid, "Idempotency-Key", fmt.Sprintf(
				"Idempotency-Key must be 1 to %d visible ASCII characters (0x21-0x7E), or a quoted structured-field string of them", o.keyLen())))
			return
		}
		if !present && o.requireKey {
			o.writeError(w, r, s.logger, apiError(codeKeyRequired, "Idempotency-Key",
				"this route needs an Idempotency-Key header: make one per logical send (a UUID), store it, and reuse it on every retry"))
			return
		}
		fp := emptyFingerprint
		if len(body) > 0 || !o.emptyBody {
			if fp, err = idempotency.Fingerprint(body); err != nil {
				o.writeError(w, r, s.logger, apiError(core.CodeInvalidJSON, "", "the request body is not valid JSON"))
				return
			}
		}
		if !present {
			s.runTx(w, r, key, body, h, nil, o)
			return
		}
		r = r.WithContext(context.WithValue(ctx, idemKeyCtx, idemKey))
		sc := idempotency.Scope{Tenant: key.Tenant, Method: r.Method, Route: r.URL.Path, Key: idemKey}
		// A completed key is answered without a write: from this process's
		// cache, from the front cache (Redis), or from the database's read
		// pool, in that order.
		now := s.svc.Now()
		if rec := s.replays.get(sc, now); rec != nil && s.answerRecord(w, r, o, rec, fp, now) {
			return
		}
		// The first request still running in this process: the contract's
		// 409 (422 for another body) from memory, before any store.
		if outcome, busy := s.running.busy(sc, fp); busy {
			s.answer(w, r, o, idempotency.Decision{Outcome: outcome})
			return
		}
		frontToken, handled := s.frontReserve(w, r, o, sc, fp)
		if handled {
			return
		}
		if s.answerStored(w, r, o, sc, fp, now) {
			s.frontRelease(ctx, sc, frontToken)
			return
		}
		// Registered atomically: of two first requests that both got this
		// far, one runs and the other gets the 409.
		if ok, outcome := s.running.enter(sc, fp); !ok {
			s.frontRelease(ctx, sc, frontToken)
			s.answer(w, r, o, idempotency.Decision{Outcome: outcome})
			return
		}
		defer s.running.leave(sc)
		s.runTx(w, r, key, body, h, &reservation{scope: sc, fingerprint: fp, frontToken: frontToken}, o)
	})
}

// answerStored answers a replay or a reused key from the database's
// completed record, read without the write lock, and reports whether it
// did. Anything else — a new key, one in flight, one expired — is decided
// inside the write transaction.
func (s *Server) answerStored(w http.ResponseWriter, r *http.Request, o postOpts, sc idempotency.Scope, fp string, now time.Time) bool {
	rec, err := s.store.CompletedIdempotency(r.Context(), sc)
	if err != nil || rec == nil {
		return false // an error here is met again, and reported, on the write path
	}
	s.replays.put(sc, rec, now)
	return s.answerRecord(w, r, o, rec, fp, now)
}

// answerRecord answers from a completed record when it decides the
// request (a replay or a reused key).
func (s *Server) answerRecord(w http.ResponseWriter, r *http.Request, o postOpts, rec *idempotency.Record, fp string, now time.Time) bool {
	d := idempotency.Decision{Outcome: idempotency.Decide(rec, fp, now), Response: rec.Response}
	if d.Outcome != idempotency.Replay && d.Outcome != idempotency.Mismatch {
		return false
	}
	return s.answer(w, r, o, d)
}

const idemKeyCtx ctxKey = 2

// idemKeyFrom returns the request's parsed Idempotency-Key, "" when none.
func idemKeyFrom(ctx context.Context) string {
	k, _ := ctx.Value(idemKeyCtx).(string)
	return k
}

func (s *Server) conflict(reason string) {
	if s.metrics != nil {
		s.metrics.IdempotencyConflicts.WithLabelValues(reason).Inc()
	}
}

type reservation struct {
	scope       idempotency.Scope
	fingerprint string
	frontToken  string // the front cache's reservation, "" without one
}

// frontReserve asks the optional front cache (Redis) first, so that a retry
// storm is answered without touching the database. The database stays the
// source of truth: any error here falls through to it, and a key the cache
// does not know is decided by the database. handled means the answer was
// written.
func (s *Server) frontReserve(w http.ResponseWriter, r *http.Request, o postOpts, sc idempotency.Scope, fp string) (token string, handled bool) {
	if s.cfg.Front == nil {
		return "", false
	}
	d, err := s.cfg.Front.Reserve(r.Context(), sc, fp, s.svc.Now(), s.cfg.ReservationLease)
	if err != nil {
		s.logger.WarnContext(r.Context(), "front idempotency cache unavailable; using the database", slog.Any("error", err))
		return "", false
	}
	if s.answer(w, r, o, d) {
		return "", true
	}
	return d.Token, false
}

// answer writes the response for a decision that ends the request —
// replay, in use, reused key — and reports whether it did.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, o postOpts, d idempotency.Decision) bool {
	switch d.Outcome {
	case idempotency.Replay:
		if s.metrics != nil {
			s.metrics.IdempotentReplays.Inc()
		}
		w.Header().Set("Idempotent-Replayed", "true")
		writeRaw(w, d.Response.Status, d.Response.ContentType, d.Response.Body)
	case idempotency.InUse:
		s.conflict("in_use")
		w.Header().Set("Retry-After", "1")
		o.writeError(w, r, s.logger, apiError(codeKeyInUse, "Idempotency-Key",
			"a request with this Idempotency-Key is still being processed; retry after a second"))
	case idempotency.Mismatch:
		s.conflict("reused")
		o.writeError(w, r, s.logger, apiError(codeKeyReused, "Idempotency-Key",
			"this Idempotency-Key was already used with a different request body"))
	default:
		return false
	}
	return true
}

func (s *Server) frontRelease(ctx context.Context, sc idempotency.Scope, token string) {
	if token == "" {
		return
	}
	if err := s.cfg.Front.Release(context.WithoutCancel(ctx), sc, token); err != nil {
		s.logger.WarnContext(ctx, "release front idempotency reservation", slog.Any("error", err))
	}
}

func (s *Server) frontComplete(ctx context.Context, sc idempotency.Scope, token string, resp idempotency.Response, now time.Time) {
	if token == "" {
		return
	}
	if err := s.cfg.Front.Complete(context.WithoutCancel(ctx), sc, token, resp, now, now.Add(s.cfg.IdempotencyTTL)); err != nil {
		// Not fatal: the database holds the response and replays it.
		s.logger.WarnContext(ctx, "store response in the front idempotency cache", slog.Any("error", err))
	}
}

// errDecided ends a transaction in which the key was found completed, in
// flight or reused: nothing of it may commit.
var errDecided = errors.New("idempotency key decided")

// runTx runs h's first step, then, in one transaction, reserves the key
// (when there is one), runs h's write step and stores its response. A
// response that is not stored rolls it all back — the reservation too, so
// a retry runs afresh; so does a panic.
func (s *Server) runTx(w http.ResponseWriter, r *http.Request, key *core.APIKey, body []byte, h txHandler, res *reservation, o postOpts) {
	ctx := r.Context()
	committed := false
	if res != nil {
		defer func() {
			if !committed {
				// Even when the handler panicked or the client went away:
				// the front cache's reservation must not outlive this request.
				s.frontRelease(context.WithoutCancel(ctx), res.scope, res.frontToken)
			}
		}()
	}
	write, perr := h(ctx, key, r, body)
	var (
		out      rollback
		decided  idempotency.Decision
		stored   idempotency.Response
		storedAt time.Time
	)
	err := s.store.InTx(ctx, func(tx core.Tx) error {
		var token string
		if res != nil {
			d, err := tx.DecideIdempotency(ctx, res.scope, res.fingerprint, s.svc.Now())
			if err != nil {
				return err
			}
			if d.Outcome != idempotency.Proceed {
				decided = d
				return errDecided
			}
			token = d.Token
		}
		status, v, herr := 0, any(nil), perr
		if herr == nil {
			status, v, herr = write(ctx, tx)
		}
		if herr != nil {
			status, v = o.style()(r, s.logger, herr)
		}
		out = rollback{status: status, body: marshal(v)}
		if !idempotency.ShouldStore(status) {
			return out
		}
		if res != nil {
			resp := idempotency.Response{Status: status, ContentType: "application/json", Body: out.body}
			now := s.svc.Now()
			if err := tx.PutIdempotency(ctx, res.scope, res.fingerprint, token, resp, now, now.Add(s.cfg.IdempotencyTTL)); err != nil {
				return err
			}
			stored, storedAt = resp, now
		}
		return nil
	})
	var rb rollback
	switch {
	case err == nil:
		committed = true
		if res != nil {
			s.replays.put(res.scope, &idempotency.Record{
				State: idempotency.StateCompleted, Fingerprint: res.fingerprint,
				ExpiresAt: storedAt.Add(s.cfg.IdempotencyTTL), Response: &stored,
			}, storedAt)
			s.frontComplete(ctx, res.scope, res.frontToken, stored, storedAt)
		}
		if out.status >= 200 && out.status < 300 && o.committed != nil {
			o.committed()
		}
		writeRaw(w, out.status, "application/json", out.body)
	case errors.Is(err, errDecided):
		if !s.answer(w, r, o, decided) {
			o.writeError(w, r, s.logger, fmt.Errorf("idempotency: unexpected outcome %v", decided.Outcome))
		}
	case errors.As(err, &rb):
		writeRaw(w, rb.status, "application/json", rb.body)
	case errors.Is(err, idempotency.ErrReservationLost):
		// Our lease ran out and another request took the key over; our
		// work rolled back, theirs decides.
		s.answer(w, r, o, idempotency.Decision{Outcome: idempotency.InUse})
	default:
		o.writeError(w, r, s.logger, err)
	}
}
