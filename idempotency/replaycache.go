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
	m     map[Scope]cacheEntry
	order []Scope // ring of the slots, oldest at next
	next  int
	bytes int // body bytes held
}

// cacheEntry is a cached record and the ring slot it was put in. An entry
// dropped before its turn (expired, or over the byte budget) leaves its
// slot behind still naming its scope; the slot number is how a later entry
// of that scope, which took a new slot, is told from the stale one, so
// that reaching the stale slot in turn evicts nothing.
type cacheEntry struct {
	rec  *Record
	slot int
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
	return &replayCache{max: n, m: make(map[Scope]cacheEntry, n)}
}

// get returns the completed record of sc, nil when the cache has none or
// it expired by now.
func (c *replayCache) get(sc Scope, now time.Time) *Record {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[sc]
	if ok && !now.Before(e.rec.ExpiresAt) {
		c.drop(sc) // its slot in the ring is reused in turn
		return nil
	}
	return e.rec
}

func (c *replayCache) drop(sc Scope) {
	if e, ok := c.m[sc]; ok {
		c.bytes -= len(e.rec.Response.Body)
		delete(c.m, sc)
	}
}

// evict drops the entry that holds ring slot i, if one still does.
func (c *replayCache) evict(i int) {
	if e, ok := c.m[c.order[i]]; ok && e.slot == i {
		c.drop(c.order[i])
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
	if e, ok := c.m[sc]; ok {
		c.bytes += len(rec.Response.Body) - len(e.rec.Response.Body)
		c.m[sc] = cacheEntry{rec: rec, slot: e.slot}
		return
	}
	slot := len(c.order)
	if slot < c.max {
		c.order = append(c.order, sc)
	} else {
		slot = c.next
		c.evict(slot)
		c.order[slot] = sc
		c.next = (c.next + 1) % c.max
	}
	c.m[sc] = cacheEntry{rec: rec, slot: slot}
	c.bytes += len(rec.Response.Body)
	// Over the byte budget: drop the oldest until under it (their ring
	// slots stay, empty, and are reused in turn).
	for i := 0; c.bytes > maxCacheBytes && i < len(c.order); i++ {
		if old := (c.next + i) % len(c.order); old != slot {
			c.evict(old)
		}
	}
}
