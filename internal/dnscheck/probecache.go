package dnscheck

import (
	"context"
	"crypto/x509"
	"sync"
	"time"
)

// DefaultProbeTTL is how long a ProbeCache keeps what a probe saw.
const DefaultProbeTTL = 10 * time.Minute

// maxProbeEntries bounds a ProbeCache: a deployment has at most
// maxReceivers receivers, each one exchanger, so this is never reached
// unless its settings change under it; past it nothing more is kept.
const maxProbeEntries = 64

// ProbeCache keeps the TLS rule's probe outcomes for a while, shared by
// every check of a process. The outcome depends on the receiver's
// exchanger and this deployment's settings, never on the domain checked,
// so however many checks tenants ask for (the periodic recheck runs no
// sender rules), each major receiver gets one connection per TTL rather
// than one per check: connections that send no mail are what receivers'
// abuse limits count, and an exchanger behind a blocked port 25 costs
// its timeout once. The probes of one exchanger that overlap are one
// probe.
type ProbeCache struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[probeKey]*probeEntry
}

// probeKey is what a probe's outcome depends on.
type probeKey struct {
	exchanger
	port, helo string
	roots      *x509.CertPool
}

type probeEntry struct {
	done  chan struct{} // closed when out and until are set
	out   tlsOutcome
	until time.Time // zero: not kept (its caller gave up on the probe)
}

// NewProbeCache returns a cache keeping outcomes for ttl (0:
// DefaultProbeTTL) by the clock now (nil: time.Now).
func NewProbeCache(ttl time.Duration, now func() time.Time) *ProbeCache {
	if ttl <= 0 {
		ttl = DefaultProbeTTL
	}
	if now == nil {
		now = time.Now
	}
	return &ProbeCache{ttl: ttl, now: now, entries: map[probeKey]*probeEntry{}}
}

// outcome is the kept outcome for k, or probe's, which it runs when none
// is kept (or the kept one is past its time) and no probe of k is under
// way. A caller that meets a probe under way waits for it, and probes
// itself if that probe's caller gave up on it; a caller whose ctx ends
// while it waits gets ctx's error as the outcome. A nil cache probes
// every time.
func (c *ProbeCache) outcome(ctx context.Context, k probeKey, probe func() tlsOutcome) tlsOutcome {
	if c == nil {
		return probe()
	}
	for {
		c.mu.Lock()
		e, ok := c.entries[k]
		if ok && !isDone(e.done) {
			c.mu.Unlock()
			select {
			case <-e.done:
				if !e.until.IsZero() {
					return e.out
				}
				continue // its caller gave up on it: probe anew
			case <-ctx.Done():
				return tlsOutcome{err: ctx.Err()}
			}
		}
		if ok && c.now().Before(e.until) {
			c.mu.Unlock()
			return e.out
		}
		e = &probeEntry{done: make(chan struct{})}
		if c.makeRoom() {
			c.entries[k] = e
		}
		c.mu.Unlock()
		return c.run(ctx, e, probe)
	}
}

// run probes for e and keeps the outcome, unless ctx ended meanwhile (a
// probe cut short by its caller is not kept). e.done is closed however
// the probe ends, a panic included, so that no waiter is left waiting.
func (c *ProbeCache) run(ctx context.Context, e *probeEntry, probe func() tlsOutcome) tlsOutcome {
	defer close(e.done)
	e.out = probe()
	if ctx.Err() == nil {
		e.until = c.now().Add(c.ttl)
	}
	return e.out
}

// makeRoom drops the entries past their time when the cache is full and
// says whether there is room for one more. c.mu is held.
func (c *ProbeCache) makeRoom() bool {
	if len(c.entries) < maxProbeEntries {
		return true
	}
	now := c.now()
	for k, e := range c.entries {
		if isDone(e.done) && !now.Before(e.until) {
			delete(c.entries, k)
		}
	}
	return len(c.entries) < maxProbeEntries
}

func isDone(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
