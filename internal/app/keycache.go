package app

import (
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// KeyCacheTTL is how long an API key read from the database is trusted
// without reading it again. It bounds how long a key revoked by another
// process (sendonce keys revoke) still works on this one; a revocation
// through this process takes effect at once.
const KeyCacheTTL = time.Second

// maxCachedKeys bounds the cache; past it the cache starts over.
const maxCachedKeys = 10000

// keyCache saves the database read that authenticating every request
// would otherwise cost (a quarter of a replay's CPU). It holds key records
// by id; the secret is still hashed and compared in constant time on every
// request. Unknown ids are not cached.
type keyCache struct {
	mu sync.Mutex
	m  map[string]cachedKey
}

type cachedKey struct {
	k     *core.APIKey // shared: never modified after it is read
	until time.Time
}

func (c *keyCache) get(id string, now time.Time) *core.APIKey {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[id]
	if !ok || !now.Before(e.until) {
		return nil
	}
	return e.k
}

func (c *keyCache) put(k *core.APIKey, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedKeys {
		c.m = make(map[string]cachedKey)
	}
	c.m[k.ID] = cachedKey{k: k, until: now.Add(KeyCacheTTL)}
}

func (c *keyCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}
