package kit

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
)

// TxHandler does a POST's work in two steps. The first runs outside any
// transaction — parsing, validating, rendering: the CPU work, which
// concurrent requests do in parallel — and returns the second, which runs
// inside the transaction that also reserves the key and stores the
// response (on SQLite one shared, group-committed transaction, so the step
// must only write). idemKey is the request's Idempotency-Key, "" without
// one. An error from either step is turned into the API's error response;
// a 5xx rolls everything back.
type TxHandler func(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, idemKey string) (WriteStep, error)

type WriteStep func(ctx context.Context, tx core.Tx) (status int, v any, err error)

// inTx is a txHandler whose work all happens in the transaction (the
// admin routes: small, and reading what they change).
func WholeTx(h func(ctx context.Context, tx core.Tx, key *core.APIKey, r *http.Request, body []byte) (int, any, error)) TxHandler {
	return func(ctx context.Context, key *core.APIKey, r *http.Request, body []byte, _ string) (WriteStep, error) {
		return func(ctx context.Context, tx core.Tx) (int, any, error) { return h(ctx, tx, key, r, body) }, nil
	}
}

// PostOpts says how one POST route treats the Idempotency-Key.
type PostOpts struct {
	// RequireKey refuses requests without a key (POST /v1/send, when
	// configured).
	RequireKey bool
	// EmptyBody allows a request without a body (approve, reject).
	EmptyBody bool
	// Committed runs after a 2xx response committed (metrics).
	Committed func()
	// MaxKeyLen is the longest Idempotency-Key the route accepts. Defaults
	// to idempotency.MaxKeyLen (the native API's 255).
	MaxKeyLen int
	// Errs writes the route's errors in its style's shape (Resend's on
	// /emails). Defaults to the native error body.
	Errs errorStyle
	// Audit writes the request of an agent key, or one carrying an
	// intent, to the audit log with its result (the send routes).
	Audit bool
	// secret: the answer carries a secret (a webhook's signing secret),
	// so it is stored sealed under SENDONCE_SECRET_KEY (sealed.go).
	Secret bool
}

// errorStyle turns an error (a *core.Error with a native code, or any
// other, internal one) into a route style's status and body.
type errorStyle func(r *http.Request, logger *slog.Logger, err error) (int, any)

// nativeErrors is the error body of /v1: errorResponse.
func nativeErrors(r *http.Request, logger *slog.Logger, err error) (int, any) {
	return ErrorResponse(r, logger, err)
}

func (o PostOpts) keyLen() int {
	if o.MaxKeyLen > 0 {
		return o.MaxKeyLen
	}
	return idempotency.MaxKeyLen
}

func (o PostOpts) style() errorStyle {
	if o.Errs == nil {
		return nativeErrors
	}
	return o.Errs
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

// Idempotent wraps a POST handler with the rules of docs/api.md,
// "Idempotency", on the server's idempotency engine: the stored response
// commits in the handler's own transaction. What was answered is one typed
// result, which the audit log and the metrics take as it is.
func (s *Base) Idempotent(o PostOpts, h TxHandler) http.Handler {
	return s.answered(o, func(w http.ResponseWriter, r *http.Request) Result { return s.decideAndRun(w, r, o, h) })
}

// answered is a write route around run: the agent's intent read first
// (o.Audit; a malformed one refuses the request), then the one result
// answered, counted and, for an agent key, a stated intent or its
// refusal, audited. The write routes and the draft send share it.
func (s *Base) answered(o PostOpts, run func(w http.ResponseWriter, r *http.Request) Result) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := APIKeyFrom(r.Context())
		intent, ierr := "", error(nil)
		if o.Audit {
			intent, ierr = intentFrom(r.Header)
		}
		var res Result
		if ierr != nil {
			res = s.refusal(r, o, ierr)
		} else {
			res = run(w, r)
		}
		s.respond(w, res)
		s.observe(o, res)
		if o.Audit && (key.Agent || intent != "" || ierr != nil) {
			s.writeAudit(r, key, intent, res)
		}
	})
}

// decideAndRun reads and fingerprints the request and runs it through the
// one write protocol (idempotency.Run) when the key (or its absence) lets
// it.
func (s *Base) decideAndRun(w http.ResponseWriter, r *http.Request, o PostOpts, h TxHandler) Result {
	ctx := r.Context()
	key := APIKeyFrom(ctx)
	body, err := s.ReadBody(w, r)
	if err != nil {
		return s.refusal(r, o, err)
	}
	idemKey, present, err := idempotency.KeyFromHeader(r.Header, o.keyLen())
	if err != nil {
		return s.refusal(r, o, ApiError(CodeKeyInvalid, "Idempotency-Key", fmt.Sprintf(
			"Idempotency-Key must be 1 to %d visible ASCII characters (0x21-0x7E), or a quoted structured-field string of them", o.keyLen())))
	}
	if !present && o.RequireKey {
		return s.refusal(r, o, ApiError(codeKeyRequired, "Idempotency-Key",
			"this route needs an Idempotency-Key header: make one per logical send (a UUID), store it, and reuse it on every retry"))
	}
	fp := emptyFingerprint
	if len(body) > 0 || !o.EmptyBody {
		if fp, err = s.FP.Fingerprint(body); err != nil {
			return s.refusal(r, o, ApiError(core.CodeInvalidJSON, "", "the request body is not valid JSON"))
		}
	}
	var (
		sc      *idempotency.Scope
		earlier func(context.Context) (*idempotency.Response, error)
		sendIDs []string
		refused Result // the styled refusal Refuse made last: the one answered
	)
	if present {
		sc, earlier = s.Svc.IdempotencyScope(key, r.Method, r.URL.Path, idemKey, idemKey, s.Idem.TTL(), fp, nil)
	}
	ran := idempotency.Run(ctx, s.Idem, idempotency.Write[core.Tx]{
		Scope: sc, Fingerprint: fp, InTx: s.Svc.InTx, Earlier: earlier,
		Prepare: func(ctx context.Context) (idempotency.Step[core.Tx], error) {
			write, err := h(ctx, key, r, body, idemKey)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, tx core.Tx) (idempotency.Response, error) {
				sendIDs = nil // the step may run more than once
				status, v, err := write(ctx, tx)
				if err != nil {
					return idempotency.Response{}, err
				}
				sendIDs = sendIDsOf(v)
				body, err := s.sealStored(o, Marshal(v))
				if err != nil {
					return idempotency.Response{}, err
				}
				return idempotency.Response{Status: status, ContentType: "application/json", Body: body}, nil
			}, nil
		},
		Refuse: func(err error) (idempotency.Response, bool) {
			if core.IsConflicted(err) {
				// Met another transaction (a deadlock): not an answer. The
				// transaction runs again.
				return idempotency.Response{}, false
			}
			refused = s.refusal(r, o, err)
			return refused.response(), true
		},
	})
	res := s.resultOf(r, o, ran, refused)
	if ran.Outcome == idempotency.Proceed && !ran.Refused {
		res.sendIDs = sendIDs
	}
	if present {
		res.idemKey = idemKey
	}
	return res
}

// resultOf turns the protocol's answer into the route's typed result.
func (s *Base) resultOf(r *http.Request, o PostOpts, ran idempotency.Result, refused Result) Result {
	switch {
	case ran.Refused:
		refused.outcome, refused.stored = idempotency.Proceed, ran.Stored
		return refused
	case ran.Err != nil:
		return s.refusal(r, o, ran.Err) // before the outcome: Begin's failure has none
	case ran.Outcome != idempotency.Proceed:
		return s.decided(r, o, idempotency.Decision{Outcome: ran.Outcome, Response: ran.Response})
	}
	body, err := s.openStored(ran.Response.Body)
	if err != nil {
		return s.refusal(r, o, err)
	}
	return Result{status: ran.Response.Status, body: body, outcome: idempotency.Proceed, stored: ran.Stored}
}
