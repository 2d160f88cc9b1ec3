package kit

import (
	"context"
	"net/http"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// reqState is what the middlewares learn of one request — the status
// written, the API key, the request's room in the in-flight bound — in
// one allocation that one context value carries. Each fact as a context
// value of its own cost a copy of the request (WithContext) and a context
// per fact: on a replay, answered in microseconds, a measurable share.
type reqState struct {
	lw      loggingWriter
	key     *core.APIKey
	charge  Charge
	charged bool
	// releaseAtEnd: the charge was taken by readBody on a route outside
	// bounded, and logRequests gives it back.
	releaseAtEnd bool
	srv          *Base
}

// stateCtx is the request's context with its state: it answers the keys
// the state holds and passes every other lookup to the context it wraps.
type stateCtx struct {
	context.Context
	st *reqState
}

func (c *stateCtx) Value(k any) any {
	switch k {
	case APIKeyCtx:
		if c.st.key != nil {
			return c.st.key
		}
	case chargeCtx:
		if c.st.charged {
			return &c.st.charge
		}
	case app.MemoryChargeKey:
		if c.st.charged {
			return c.st
		}
	case stateKey:
		return c.st
	}
	return c.Context.Value(k)
}

const stateKey ctxKey = 3

func stateFrom(ctx context.Context) *reqState {
	st, _ := ctx.Value(stateKey).(*reqState)
	return st
}

// ChargeMemory implements app.MemoryCharge: downloads made for the
// request add to its room.
func (st *reqState) ChargeMemory(ctx context.Context, n int64) error {
	return st.srv.chargeAdd(ctx, &st.charge, n)
}

// WithKey is r carrying the authenticated key, and names the key in the
// request's log line.
func WithKey(w http.ResponseWriter, r *http.Request, key *core.APIKey) *http.Request {
	if lw, ok := w.(*loggingWriter); ok {
		lw.keyID = app.KeyFingerprint(key)
	}
	if st := stateFrom(r.Context()); st != nil {
		st.key = key
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), APIKeyCtx, key))
}

// chargeFunc adapts a function to app.MemoryCharge.
type chargeFunc func(ctx context.Context, n int64) error

func (f chargeFunc) ChargeMemory(ctx context.Context, n int64) error { return f(ctx, n) }
