package idempotency

import (
	"sync"
	"time"
)

// DefaultReplayCacheEntries is how many completed keys a process keeps in
// memory for replays when Config.ReplayCacheEntries is 0 (the server's default; the middleware keeps none unless asked).
const DefaultReplayCacheEntries = 10000

// maxCachedBody keeps large stored responses out of the cache: it is for
// the common, small answer of a send (typically under 1 KiB).
const maxCachedBody = 16 << 10

// maxCacheBytes bounds the bodies the cache holds in all, whatever the
// entry bound: at most this much memory goes to replays.
const maxCacheBytes = 16 << 20

// replayCache keeps completed idempotency records of this process, so that
// a retry storm is answered without touching the database.
//
// It can never answer wrongly: a completed record does not change in the
// database until it expires (a key is only ever taken over after its
// expiry, and only in-flight reservations are released), the cache honours
// that expiry, and its key is the whole scope — tenant, method, route and
// key — so no tenant sees another's response. Eviction is first in, first
// out: a storm's keys are the newest.
type replayCache struct {
	mu    sync.Mutex
	max   int
	m     map[Scope]*Record
	order []Scope // ring of the keys in m, oldest at next
	next  int
	bytes int // body bytes held
}

// newReplayCache returns a cache of at most n records; nil (no cache) when
// n < 0.
func newReplayCache(n int) *replayCache {
	if n < 0 {
		return nil
	}
	if n == 0 {
		n = DefaultReplayCacheEntries
	}
	return &replayCache{max: n, m: make(map[Scope]*Record, n)}
}

// get returns the completed record of sc, nil when the cache has none or
// it expired by now.
func (c *replayCache) get(sc Scope, now time.Time) *Record {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.m[sc]
	if rec != nil && !now.Before(rec.ExpiresAt) {
		c.drop(sc) // its slot in the ring is reused in turn
		return nil
	}
	return rec
}

func (c *replayCache) drop(sc Scope) {
	if rec, ok := c.m[sc]; ok {
		c.bytes -= len(rec.Response.Body)
		delete(c.m, sc)
	}
}

// put keeps a completed, unexpired record. The record must not be changed
// afterwards.
func (c *replayCache) put(sc Scope, rec *Record, now time.Time) {
	if c == nil || rec.State != StateCompleted || rec.Response == nil ||
		len(rec.Response.Body) > maxCachedBody || !now.Before(rec.ExpiresAt) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[sc]; ok {
		c.drop(sc)
		c.m[sc] = rec
		c.bytes += len(rec.Response.Body)
		return
	}
	if len(c.order) < c.max {
		c.order = append(c.order, sc)
	} else {
		c.drop(c.order[c.next])
		c.order[c.next] = sc
		c.next = (c.next + 1) % c.max
	}
	c.m[sc] = rec
	c.bytes += len(rec.Response.Body)
	// Over the byte budget: drop the oldest until under it (their ring
	// slots stay, empty, and are reused in turn).
	for i := 0; c.bytes > maxCacheBytes && i < len(c.order); i++ {
		old := (c.next + i) % len(c.order)
		if c.order[old] != sc {
			c.drop(c.order[old])
		}
	}
}
