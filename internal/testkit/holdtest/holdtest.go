// Package holdtest is an HTTP server on loopback that holds every request
// until the test releases it, and counts how many it holds at once: the
// slow far end a test needs to see that sendonce bounds its concurrent
// outbound requests (attachment downloads, webhook attempts).
package holdtest

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Server holds each request until Release, or until its hold passes, then
// answers 200 with its body.
type Server struct {
	URL           string
	running, most atomic.Int32
	release       chan struct{}
	once          sync.Once
}

// Start starts a server that holds each request up to hold and then
// answers body. It is released and closed when the test ends.
func Start(t testing.TB, hold time.Duration, body []byte) *Server {
	t.Helper()
	s := &Server{release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.running.Add(1)
		defer s.running.Add(-1)
		for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
		}
		select {
		case <-s.release:
		case <-time.After(hold):
		}
		w.Write(body)
	}))
	s.URL = srv.URL
	// Released first: Close waits for the handlers.
	t.Cleanup(srv.Close)
	t.Cleanup(s.Release)
	return s
}

// Release lets every held request, and every later one, go at once.
func (s *Server) Release() { s.once.Do(func() { close(s.release) }) }

// PeakAfter waits (up to timeout) until n requests are held at once, then
// for settle more, room for any request past a bound to arrive, and
// returns the most it held at once.
func (s *Server) PeakAfter(n int, timeout, settle time.Duration) int {
	for deadline := time.Now().Add(timeout); int(s.running.Load()) < n && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(settle)
	return int(s.most.Load())
}
