package ratelimit

import (
	"context"
	"sync"
	"time"
)

// The binary's default limit per API key (--rate-limit,
// --rate-limit-window): off. A self-hosted server's keys belong to the
// operator's own applications, and a retry storm on one key is exactly
// what the idempotency layer answers from memory: refusing it with 429s
// would turn replays the client can trust into errors it must handle. A
// hosted deployment, whose keys belong to strangers, turns it on;
// SuggestedRequests is what docs/security.md suggests then (50 times
// Resend's default of 2 a second, so an application that sends its mail
// one request at a time never meets it). The window is a second so that
// Retry-After is short and a burst is forgotten at once.
const (
	DefaultRequests   = 0
	SuggestedRequests = 100
	DefaultWindow     = time.Second
)

// Limit is N requests per window.
type Limit struct {
	Requests int
	Window   time.Duration
}

// On reports whether l limits anything: a Limit with no requests or no
// window is off.
func (l Limit) On() bool { return l.Requests > 0 && l.Window > 0 }

// Result is one request's count against its limit.
type Result struct {
	// Allowed: the request fits in its window.
	Allowed bool
	// Limit is the limit's Requests; Remaining what is left of it in this
	// window (0 when refused).
	Limit, Remaining int
	// Reset is the time left until the window ends and the count starts
	// over: Retry-After of a refused request.
	Reset time.Duration
}

// Limiter counts a request under key against l.
type Limiter interface {
	Take(ctx context.Context, key string, l Limit) (Result, error)
}

// window returns the index of the window now is in and the time left in it.
func window(now time.Time, w time.Duration) (idx int64, left time.Duration) {
	ns := now.UnixNano()
	idx = ns / int64(w)
	return idx, time.Duration((idx+1)*int64(w) - ns)
}

func result(l Limit, n int64, left time.Duration) Result {
	r := Result{Allowed: n <= int64(l.Requests), Limit: l.Requests, Reset: left}
	if r.Allowed {
		r.Remaining = l.Requests - int(n)
	}
	return r
}

// Memory is a Limiter in this process's memory. Behind several processes
// each counts its own requests, so a client spread over P processes gets
// up to P times the limit.
type Memory struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]*counter
	// sweepAt is the map size at which windows past are dropped.
	sweepAt int
}

type counter struct {
	idx int64
	n   int64
	// w is the counter's window, so a sweep can tell it is past.
	w time.Duration
}

// minSweep is the smallest map size that triggers a sweep.
const minSweep = 1024

// NewMemory returns an in-memory Limiter on the clock now (time.Now when
// nil).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, m: make(map[string]*counter), sweepAt: minSweep}
}

// Take implements Limiter; it never fails.
func (m *Memory) Take(_ context.Context, key string, l Limit) (Result, error) {
	idx, left := window(m.now(), l.Window)
	m.mu.Lock()
	c := m.m[key]
	if c == nil {
		if len(m.m) >= m.sweepAt {
			m.sweep()
		}
		c = &counter{}
		m.m[key] = c
	}
	if c.idx != idx || c.w != l.Window {
		c.idx, c.n, c.w = idx, 0, l.Window
	}
	c.n++
	n := c.n
	m.mu.Unlock()
	return result(l, n, left), nil
}

// sweep drops the counters of windows that have ended, so keys seen once
// do not stay for ever; it runs when the map has doubled since the last.
func (m *Memory) sweep() {
	now := m.now()
	for k, c := range m.m {
		if idx, _ := window(now, c.w); idx != c.idx {
			delete(m.m, k)
		}
	}
	m.sweepAt = max(minSweep, 2*len(m.m))
}

// Len is the number of keys counted, for tests of the sweep.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}
