package kit

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// The request limits: the body sizes, and the bound on the bytes of large
// requests being worked on at once.

// Defaults of the request limits (--max-request-size, --max-inflight-bytes).
const (
	DefaultMaxRequestBytes = 40 << 20 // the send routes
	DefaultMaxBodyBytes    = 1 << 20  // every other route
	// DefaultMaxInflightBytes bounds the bodies of large send requests
	// being read, decoded and stored at one time: each holds a few times
	// its size while it runs, so this bounds the server's memory.
	DefaultMaxInflightBytes = 96 << 20
	// DefaultInflightWait is how long a large request waits for room
	// before it is answered 503 with Retry-After.
	DefaultInflightWait = 30 * time.Second
	// smallRequest is the declared size from which a request also holds
	// room in the large requests' share of the bound.
	smallRequest = 1 << 20
)

// Inflight bounds the bytes of the send requests in progress. Every
// request is charged its declared size up front and, once its body is read
// and scanned, what decoding it will materialise (jsonShape.cost): a small
// body of many values costs more than its bytes. Large requests (from
// smallRequest up) also hold room in large, which leaves a quarter of the
// bound to small requests, so a few large sends never make an ordinary
// one wait.
type Inflight struct {
	all   *semaphore.Weighted
	large *semaphore.Weighted
	limit int64 // of all
	// largeLimit is what large requests may hold together, and the most
	// one request is charged for its declared size.
	largeLimit int64
}

func NewInflight(limit int64) *Inflight {
	largeLimit := max(limit-limit/4, 1)
	return &Inflight{all: semaphore.NewWeighted(limit), large: semaphore.NewWeighted(largeLimit), limit: limit, largeLimit: largeLimit}
}

// Charge is the room one request holds in all; readBody and the
// request's attachment downloads add to it.
type Charge struct {
	mu   sync.Mutex
	held int64
}

const chargeCtx ctxKey = 2

// Bounded holds room for the request's declared size (the route's limit
// when it declares none) while next runs; with no room within
// inflightWait it answers 503 service_unavailable with Retry-After.
func (s *Base) Bounded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := r.ContentLength
		if n < 0 || n > s.Cfg.MaxRequestBytes {
			n = s.Cfg.MaxRequestBytes
		}
		n = min(n, s.Inflight.largeLimit)
		if n >= smallRequest {
			if err := s.acquire(r.Context(), s.Inflight.large, n); err != nil {
				s.writeBusy(w, r)
				return
			}
			defer s.Inflight.large.Release(n)
		}
		if err := s.acquire(r.Context(), s.Inflight.all, n); err != nil {
			s.writeBusy(w, r)
			return
		}
		if st := stateFrom(r.Context()); st != nil {
			st.charge.held, st.charged = n, true
			defer func() { s.Inflight.all.Release(st.charge.held) }()
			next.ServeHTTP(w, r)
			return
		}
		c := &Charge{held: n}
		defer func() { s.Inflight.all.Release(c.held) }()
		ctx := context.WithValue(r.Context(), chargeCtx, c)
		ctx = app.WithMemoryCharge(ctx, chargeFunc(func(ctx context.Context, more int64) error { return s.chargeAdd(ctx, c, more) }))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// chargeMore raises the request's room in the bound to cost, what its
// body will cost (jsonShape.cost), when that is more than the declared size
// already held. Routes outside bounded (the 1 MiB ones) have no charge and
// are bounded by their size and shape.
func (s *Base) chargeMore(r *http.Request, cost int64) error {
	c, _ := r.Context().Value(chargeCtx).(*Charge)
	if c == nil {
		return s.chargeUnbounded(r.Context(), cost)
	}
	c.mu.Lock()
	extra := min(cost, s.Inflight.limit) - c.held
	c.mu.Unlock()
	if extra <= 0 {
		return nil
	}
	return s.chargeAdd(r.Context(), c, extra)
}

// chargeUnbounded charges the body of a route outside bounded (the 1 MiB
// routes) what it will cost, waiting up to InflightWait, until the request
// ends (logRequests gives it back): twenty heavy 1 MiB bodies at once
// would otherwise hold their decoding outside the bound.
func (s *Base) chargeUnbounded(ctx context.Context, cost int64) error {
	st := stateFrom(ctx)
	if st == nil || st.charged {
		return nil
	}
	cost = min(cost, s.Inflight.limit)
	if err := s.acquire(ctx, s.Inflight.all, cost); err != nil {
		return errBusy()
	}
	st.charge.held, st.charged, st.releaseAtEnd = cost, true, true
	return nil
}

// chargeAdd adds n bytes to the request's room, waiting up to
// InflightWait; more than the whole bound can never come and is refused
// at once.
func (s *Base) chargeAdd(ctx context.Context, c *Charge, n int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held+n > s.Inflight.limit {
		return errBusy()
	}
	if err := s.acquire(ctx, s.Inflight.all, n); err != nil {
		return errBusy()
	}
	c.held += n
	return nil
}

// acquire takes n of sem, waiting up to InflightWait. Room is there almost
// always: that path costs no timer (a replay spends a few microseconds in
// all, and a context with a deadline was a measurable part of it).
func (s *Base) acquire(ctx context.Context, sem *semaphore.Weighted, n int64) error {
	if sem.TryAcquire(n) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.Cfg.InflightWait)
	defer cancel()
	return sem.Acquire(ctx, n)
}

func errBusy() error {
	return core.Errorf(core.CodeUnavailable, "", "too many large requests are being processed; retry after Retry-After")
}

// writeBusy answers a request that found no room in the bound.
func (s *Base) writeBusy(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", s.retryAfter())
	writeStyled(w, r, s, errBusy())
}

func (s *Base) retryAfter() string {
	return strconv.Itoa(max(1, int(s.Cfg.InflightWait/time.Second)))
}
