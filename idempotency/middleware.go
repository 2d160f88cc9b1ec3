package idempotency

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Error codes the middleware answers with (docs/api.md, "Idempotency").
const (
	CodeKeyInvalid      = "idempotency_key_invalid"  // 400
	CodeKeyRequired     = "idempotency_key_required" // 400
	CodeKeyInUse        = "idempotency_key_in_use"   // 409, with Retry-After: 1
	CodeKeyReused       = "idempotency_key_reused"   // 422
	CodeInvalidJSON     = "invalid_json"             // 400: no fingerprint exists
	CodePayloadTooLarge = "payload_too_large"        // 413: request body over Options.MaxRequestBytes
	CodeInternal        = "internal_error"           // 500: the store failed
)

// ReplayedHeader marks a replayed response; a first response never carries it.
const ReplayedHeader = "Idempotent-Replayed"

// Error is an answer the middleware gives instead of running the handler.
type Error struct {
	Status  int    // HTTP status
	Code    string // one of the Code constants
	Message string // for humans; never contains the key or internal details
	Param   string // "Idempotency-Key" for errors about the key
	Err     error  // the cause, for logs only; never written to the client
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Code + ": " + e.Message + ": " + e.Err.Error()
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// ErrorWriter writes e as the response. Headers the contract asks for
// (Retry-After on 409) are already set on w.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, e *Error)

// WriteJSONError is the default ErrorWriter:
// {"error": {"code": "…", "message": "…", "param": "…"}}.
func WriteJSONError(w http.ResponseWriter, _ *http.Request, e *Error) {
	type body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Param   string `json:"param,omitempty"`
	}
	b, _ := json.Marshal(struct {
		Error body `json:"error"`
	}{body{e.Code, e.Message, e.Param}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(e.Status)
	_, _ = w.Write(b)
}

// Options configure Middleware. The zero value (or nil) gives the default
// each field names.
type Options struct {
	// Methods the middleware applies to; other requests pass straight
	// through. Defaults to POST and PATCH.
	Methods []string
	// Match, when set, selects the routes the middleware applies to:
	// requests for which it returns false pass straight through. Defaults
	// to every route.
	Match func(r *http.Request) bool
	// Route is the route part of a key's scope. Defaults to r.URL.Path, so
	// the same key on another path (another path parameter included) is
	// another key.
	Route func(r *http.Request) string
	// Tenant is the tenant part of a key's scope: the authenticated
	// account (not the credential, so that rotating an API key does not
	// make a retry a new request). Defaults to "" (one tenant). It runs
	// after the middlewares that wrap this one, so authenticate first.
	Tenant func(r *http.Request) string
	// RequireKey refuses requests without an Idempotency-Key with
	// 400 idempotency_key_required. Defaults to false: such requests run
	// without idempotency.
	RequireKey bool
	// MaxKeyLen is the longest key accepted. Defaults to MaxKeyLen (255).
	MaxKeyLen int
	// TTL is how long a completed key replays. Defaults to 24 hours.
	TTL time.Duration
	// Lease is how long a reservation holds a key before another request
	// may take it over (its holder is presumed dead). Defaults to 30
	// seconds. Keep it above your handlers' longest run.
	Lease time.Duration
	// ShouldStore says which statuses are stored and replayed. Defaults to
	// the package's ShouldStore: every 2xx and every 4xx but 401, 403, 409,
	// 413 and 429. A response that is not stored releases the key.
	ShouldStore func(status int) bool
	// MaxResponseBytes is the largest response body stored. A larger
	// response is not stored and releases the key (with RunInTx it is
	// rolled back and answered with 500, since its writes could not commit
	// with their response). Defaults to 1 MiB.
	MaxResponseBytes int
	// MaxRequestBytes is the largest request body read to fingerprint it;
	// a larger one gets 413 payload_too_large. Defaults to 1 MiB.
	MaxRequestBytes int64
	// Fingerprint computes the request's fingerprint from its body.
	// Defaults to the package's Fingerprint (SHA-256 of the RFC 8785
	// canonical JSON) through a FingerprintMemo, with an empty body
	// counting as {}. An error answers
	// 400 invalid_json.
	Fingerprint func(body []byte) (string, error)
	// RunInTx runs the handler inside a transaction of the store, which
	// must then be a TxStore (SQLStore is). The handler writes through
	// TxFromContext(r.Context()); the middleware commits those writes
	// together with the stored response, or rolls them back when the
	// response is not stored (5xx, panic, lost reservation). Requests
	// without a key get a transaction too.
	RunInTx bool
	// ErrorWriter writes the middleware's own errors. Defaults to
	// WriteJSONError.
	ErrorWriter ErrorWriter
	// Front is an optional store shared by processes that answers
	// replays before Store is asked (a redisstore.Store in front of an
	// SQLStore); see Config.Front.
	Front Store
	// ReplayCacheEntries keeps up to this many completed records in the
	// process's memory, answering replays without a store call. Defaults
	// to 0: none.
	ReplayCacheEntries int
	// Logger receives store failures that cannot be answered to the
	// client (a failed release). Defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

const (
	defaultMaxBytes = 1 << 20
	// cleanupTimeout bounds the store calls made after the client's
	// context may have ended (complete, commit, release).
	cleanupTimeout = 10 * time.Second
)

func (o Options) withDefaults() Options {
	if len(o.Methods) == 0 {
		o.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if o.Route == nil {
		o.Route = func(r *http.Request) string { return r.URL.Path }
	}
	if o.Tenant == nil {
		o.Tenant = func(*http.Request) string { return "" }
	}
	o.MaxKeyLen = positiveOr(o.MaxKeyLen, MaxKeyLen)
	o.TTL = positiveOr(o.TTL, DefaultTTL)
	o.Lease = positiveOr(o.Lease, DefaultLease)
	if o.ShouldStore == nil {
		o.ShouldStore = ShouldStore
	}
	o.MaxResponseBytes = positiveOr(o.MaxResponseBytes, defaultMaxBytes)
	o.MaxRequestBytes = positiveOr(o.MaxRequestBytes, defaultMaxBytes)
	if o.Fingerprint == nil {
		o.Fingerprint = jsonFingerprint(NewFingerprintMemo(DefaultFingerprintMemo))
	}
	if o.ErrorWriter == nil {
		o.ErrorWriter = WriteJSONError
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

var emptyObjectFingerprint = func() string {
	fp, err := Fingerprint([]byte("{}"))
	if err != nil {
		panic(err)
	}
	return fp
}()

// jsonFingerprint is the default Fingerprint: the package's, through a
// memo of the middleware's own, with an empty body counting as {}.
func jsonFingerprint(memo *FingerprintMemo) func([]byte) (string, error) {
	return func(body []byte) (string, error) {
		if len(bytes.TrimSpace(body)) == 0 {
			return emptyObjectFingerprint, nil
		}
		return memo.Fingerprint(body)
	}
}

type ctxKey int

const (
	txCtxKey ctxKey = iota + 1
	scopeCtxKey
)

// TxFromContext returns the transaction a handler runs in under
// Options.RunInTx, or nil.
func TxFromContext(ctx context.Context) *sql.Tx {
	tx, _ := ctx.Value(txCtxKey).(*sql.Tx)
	return tx
}

// ScopeFromContext returns the scoped key the request holds a reservation
// for, if it sent one. A handler whose side effects do not share the
// store's transaction (redisstore.Store, MemoryStore, or no RunInTx) should put
// a unique constraint on this key in its own table.
func ScopeFromContext(ctx context.Context) (Scope, bool) {
	sc, ok := ctx.Value(scopeCtxKey).(Scope)
	return sc, ok
}

// WithTx adapts a handler that writes in the request's transaction (see
// Options.RunInTx). Without one it answers 500.
func WithTx(h func(w http.ResponseWriter, r *http.Request, tx *sql.Tx)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx := TxFromContext(r.Context())
		if tx == nil {
			WriteJSONError(w, r, &Error{Status: http.StatusInternalServerError, Code: CodeInternal,
				Message: "internal error"})
			return
		}
		h(w, r, tx)
	})
}

// Middleware returns a net/http middleware that makes requests with an
// Idempotency-Key header safe to retry, as docs/api.md ("Idempotency")
// describes sendonce's API, with store keeping the records. opts may be nil. It panics
// when store is nil, or when opts.RunInTx is set and store is not a
// TxStore: both are programming errors.
func Middleware(store Store, opts *Options) func(http.Handler) http.Handler {
	if store == nil {
		panic("idempotency.Middleware: nil store")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	m := &middleware{o: o, engine: NewEngine(Config{Store: store, Front: o.Front,
		ReplayCacheEntries: o.ReplayCacheEntries, TTL: o.TTL, Lease: o.Lease, Now: o.Now, Logger: o.Logger})}
	if o.RunInTx {
		txs, ok := store.(TxStore)
		if !ok {
			panic(fmt.Sprintf("idempotency.Middleware: RunInTx needs a TxStore, %T is not one", store))
		}
		m.txs = txs
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.serve(w, r, next)
		})
	}
}

type middleware struct {
	engine *Engine
	txs    TxStore // non-nil under RunInTx
	o      Options
}

func (m *middleware) fail(w http.ResponseWriter, r *http.Request, e *Error) {
	if e.Status == http.StatusConflict {
		w.Header().Set("Retry-After", "1")
	}
	if e.Err != nil {
		m.o.Logger.ErrorContext(r.Context(), "idempotency middleware", slog.String("code", e.Code), slog.Any("error", e.Err))
	}
	m.o.ErrorWriter(w, r, e)
}

var (
	errInUse = &Error{Status: http.StatusConflict, Code: CodeKeyInUse, Param: "Idempotency-Key",
		Message: "a request with this Idempotency-Key is still being processed; retry after a second"}
	errReused = &Error{Status: http.StatusUnprocessableEntity, Code: CodeKeyReused, Param: "Idempotency-Key",
		Message: "this Idempotency-Key was already used with a different request body"}
)

func internal(err error) *Error {
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error", Err: err}
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if !slices.Contains(m.o.Methods, r.Method) || (m.o.Match != nil && !m.o.Match(r)) {
		next.ServeHTTP(w, r)
		return
	}
	key, present, err := KeyFromHeader(r.Header, m.o.MaxKeyLen)
	if err != nil {
		m.fail(w, r, &Error{Status: http.StatusBadRequest, Code: CodeKeyInvalid, Param: "Idempotency-Key",
			Message: fmt.Sprintf("Idempotency-Key must be 1 to %d visible ASCII characters (0x21-0x7E), or a quoted structured-field string of them", m.o.MaxKeyLen)})
		return
	}
	if !present {
		if m.o.RequireKey {
			m.fail(w, r, &Error{Status: http.StatusBadRequest, Code: CodeKeyRequired, Param: "Idempotency-Key",
				Message: "this route needs an Idempotency-Key header: make one per logical operation (a UUID), store it, and reuse it on every retry"})
			return
		}
		if m.txs == nil {
			next.ServeHTTP(w, r)
			return
		}
		m.run(w, r, next, nil)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, m.o.MaxRequestBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			m.fail(w, r, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge,
				Message: fmt.Sprintf("the request body is larger than %d bytes", m.o.MaxRequestBytes)})
			return
		}
		m.fail(w, r, &Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON, Message: "the request body could not be read"})
		return
	}
	fp, err := m.o.Fingerprint(body)
	if err != nil {
		m.fail(w, r, &Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON, Message: "the request body is not valid JSON"})
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	sc := Scope{Tenant: m.o.Tenant(r), Method: r.Method, Route: m.o.Route(r), Key: key}
	t, err := m.engine.Begin(r.Context(), sc, fp)
	if err != nil {
		m.fail(w, r, internal(err))
		return
	}
	switch d := t.Decision; d.Outcome {
	case Replay:
		writeReplay(w, d.Response)
	case InUse:
		m.fail(w, r, errInUse)
	case Mismatch:
		m.fail(w, r, errReused)
	case Proceed:
		m.run(w, r, next, t)
	default:
		m.fail(w, r, internal(fmt.Errorf("store returned outcome %v", d.Outcome)))
	}
}

func writeReplay(w http.ResponseWriter, resp *Response) {
	h := w.Header()
	if resp.ContentType != "" {
		h.Set("Content-Type", resp.ContentType)
	}
	h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
	h.Set(ReplayedHeader, "true")
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// run runs the handler with a buffered response and commits the outcome.
// t is nil for a request without a key (under RunInTx only).
func (m *middleware) run(w http.ResponseWriter, r *http.Request, next http.Handler, t *Ticket) {
	// The outcome is decided here, not by the client's connection: store
	// calls after the handler use a context that outlives a disconnect.
	bg := context.WithoutCancel(r.Context())
	ctx := r.Context()
	var tx *sql.Tx
	if m.txs != nil {
		var err error
		if tx, err = m.txs.BeginTx(bg); err != nil {
			t.release(bg)
			m.fail(w, r, internal(fmt.Errorf("begin: %w", err)))
			return
		}
		ctx = context.WithValue(ctx, txCtxKey, tx)
	}
	if t != nil {
		ctx = context.WithValue(ctx, scopeCtxKey, t.Scope())
	}
	buf := &bufferedWriter{w: w, header: make(http.Header), limit: m.o.MaxResponseBytes, passthrough: tx == nil}
	returned := false
	defer func() {
		if returned {
			return
		}
		// The handler panicked (or called runtime.Goexit): nothing is
		// stored, its writes roll back, and a retry runs afresh.
		p := recover()
		if tx != nil {
			_ = tx.Rollback()
		}
		t.release(bg)
		if p != nil {
			panic(p)
		}
	}()
	next.ServeHTTP(buf, r.WithContext(ctx))
	returned = true

	status := buf.statusCode()
	stored := m.o.ShouldStore(status) && !buf.overflow
	resp := Response{Status: status, ContentType: buf.header.Get("Content-Type"), Body: buf.body.Bytes()}
	if resp.ContentType == "" && len(resp.Body) > 0 {
		// Go would sniff it on the first response; store what it sniffs.
		resp.ContentType = http.DetectContentType(resp.Body)
		buf.header.Set("Content-Type", resp.ContentType)
	}
	if tx != nil {
		m.finishTx(w, r, buf, tx, t, resp, stored)
		return
	}
	// Without a shared transaction the handler's side effects have
	// happened whatever we store: its response is the truth for this
	// request and is always sent.
	if t != nil {
		if !stored {
			t.Release(bg)
		} else if err := t.Complete(bg, resp); err != nil {
			m.o.Logger.ErrorContext(r.Context(), "idempotency: response not stored; a retry will run the handler again",
				slog.Any("error", err))
		}
	}
	buf.flush()
}

// finishTx commits the handler's transaction with its stored response, or
// rolls it back when the response is not stored.
func (m *middleware) finishTx(w http.ResponseWriter, r *http.Request, buf *bufferedWriter, tx *sql.Tx, t *Ticket, resp Response, stored bool) {
	bg := context.WithoutCancel(r.Context())
	if !stored {
		_ = tx.Rollback()
		t.release(bg)
		if buf.overflow {
			m.fail(w, r, internal(fmt.Errorf("response body over MaxResponseBytes (%d); rolled back", m.o.MaxResponseBytes)))
			return
		}
		buf.flush()
		return
	}
	if t != nil {
		cctx, cancel := context.WithTimeout(bg, cleanupTimeout)
		defer cancel()
		now := m.o.Now()
		if err := m.txs.CompleteTx(cctx, tx, t.Scope(), t.Token(), resp, now, now.Add(m.o.TTL)); err != nil {
			_ = tx.Rollback()
			if errors.Is(err, ErrReservationLost) {
				// Our lease ran out and another request took the key
				// over; our writes rolled back, theirs decide.
				t.token = ""
				t.release(bg)
				m.fail(w, r, errInUse)
				return
			}
			t.release(bg)
			m.fail(w, r, internal(fmt.Errorf("complete: %w", err)))
			return
		}
	}
	if err := tx.Commit(); err != nil {
		// If the commit did happen after all, the key is completed and
		// the release does nothing.
		t.release(bg)
		m.fail(w, r, internal(fmt.Errorf("commit: %w", err)))
		return
	}
	if t != nil {
		t.Committed(bg, &resp)
	}
	buf.flush()
}
