package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/sync/semaphore"

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
	// smallRequest is the size below which a request does not count
	// against the bound: ordinary sends never wait.
	smallRequest = 1 << 20
)

// inflight bounds the bytes of large requests in progress.
type inflight struct {
	sem   *semaphore.Weighted
	limit int64
}

func newInflight(limit int64) *inflight {
	return &inflight{sem: semaphore.NewWeighted(limit), limit: limit}
}

// bounded holds room for the request's declared size (the route's limit
// when it declares none) while next runs; with no room within
// inflightWait it answers 503 service_unavailable with Retry-After.
func (s *Server) bounded(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := r.ContentLength
		if n < 0 || n > s.cfg.MaxRequestBytes {
			n = s.cfg.MaxRequestBytes
		}
		if n < smallRequest {
			next.ServeHTTP(w, r)
			return
		}
		n = min(n, s.inflight.limit)
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.InflightWait)
		err := s.inflight.sem.Acquire(ctx, n)
		cancel()
		if err != nil {
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(s.cfg.InflightWait/time.Second))))
			writeStyled(w, r, s, core.Errorf(core.CodeUnavailable, "", "too many large requests are being processed; retry after Retry-After"))
			return
		}
		defer s.inflight.sem.Release(n)
		next.ServeHTTP(w, r)
	})
}
