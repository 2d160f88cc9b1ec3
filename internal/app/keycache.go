package app

import (
	"sync"
	"time"
)

// KeyCacheTTL is how long an API key read from the database is trusted
// without reading it again. It bounds how long a key revoked by another
// process (sendonce keys revoke) still works on this one; a revocation
// through this process takes effect at once.
const KeyCacheTTL = time.Second

// MailboxCacheTTL is how long a resolved mailbox is reused: every accept
// and every attempt resolves one. A mailbox created through this process
// is seen at once; through another, within this time.
const MailboxCacheTTL = time.Second

// maxCached bounds each cache; past it the cache starts over.
const maxCached = 10000

// ttlCache keeps records read from the database for a short time, to save
// the read that every request would otherwise cost (for API keys a quarter
// of a replay's CPU). Values are shared: never modified after they are
// read. Misses are not cached.
//
// A hit takes no lock (sync.Map: the same few keys are read by every
// request and written once a TTL); put and forget take mu.
//
// A forget must win over a fill that read the database before it: a
// reader that fetched a key, then lost the CPU while the key was revoked
// and forgotten, would otherwise put the old record back for a whole TTL.
// So every forget bumps a generation, a reader takes the generation
// before its read, and put keeps the value only if no forget came since.
type ttlCache[V any] struct {
	ttl time.Duration
	m   sync.Map // string → cached[V]

	mu  sync.Mutex // serialises put and forget
	n   int        // entries stored since the map last started over
	gen uint64     // forgets so far
}

type cached[V any] struct {
	v     V
	until time.Time
}

func (c *ttlCache[V]) get(id string, now time.Time) (V, bool) {
	e, ok := c.m.Load(id)
	if !ok || !now.Before(e.(cached[V]).until) {
		var zero V
		return zero, false
	}
	return e.(cached[V]).v, true
}

// generation is what a reader takes before it reads the database, to give
// to put.
func (c *ttlCache[V]) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// put caches v unless a forget happened since gen was taken: then v may
// be older than what that forget stood for.
func (c *ttlCache[V]) put(id string, v V, now time.Time, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.n >= maxCached {
		c.m.Clear()
		c.n = 0
	}
	if _, loaded := c.m.Swap(id, cached[V]{v: v, until: now.Add(c.ttl)}); !loaded {
		c.n++
	}
}

func (c *ttlCache[V]) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.m.Delete(id)
}
