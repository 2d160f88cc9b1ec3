package idempotency

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func completed(body string, expires time.Time) *Record {
	return &Record{
		State: StateCompleted, Fingerprint: "fp", ExpiresAt: expires,
		Response: &Response{Status: 200, ContentType: "application/json", Body: []byte(body)},
	}
}

func scopeN(i int) Scope {
	return Scope{Tenant: "t", Method: "POST", Route: "/v1/send", Key: fmt.Sprint("k", i)}
}

// The cache holds at most its bound, dropping the oldest first.
func TestReplayCache_BoundedOldestOut(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newReplayCache(3)
	for i := range 5 {
		c.put(scopeN(i), completed(fmt.Sprint(i), now.Add(time.Hour)), now)
	}
	if len(c.m) != 3 {
		t.Fatalf("%d entries, want 3", len(c.m))
	}
	for i := range 5 {
		got := c.get(scopeN(i), now)
		if want := i >= 2; (got != nil) != want {
			t.Errorf("key %d cached=%v, want %v", i, got != nil, want)
		}
	}
}

// An expired record is never served, and is not taken in.
func TestReplayCache_HonoursExpiry(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newReplayCache(10)
	c.put(scopeN(1), completed("a", now.Add(time.Minute)), now)
	if c.get(scopeN(1), now.Add(59*time.Second)) == nil {
		t.Fatal("not served before its expiry")
	}
	if c.get(scopeN(1), now.Add(time.Minute)) != nil {
		t.Fatal("served at its expiry")
	}
	c.put(scopeN(2), completed("b", now), now)
	if c.get(scopeN(2), now.Add(-time.Second)) != nil {
		t.Fatal("took in a record already expired")
	}
}

// Scopes differing only by tenant (or route) never share an entry, large
// responses and unfinished records stay out, and a nil cache is off.
func TestReplayCache_ScopeSizeAndOff(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newReplayCache(10)
	a := Scope{Tenant: "a", Method: "POST", Route: "/v1/send", Key: "same"}
	b := a
	b.Tenant = "b"
	c.put(a, completed("tenant a", now.Add(time.Hour)), now)
	if c.get(b, now) != nil {
		t.Fatal("tenant b got tenant a's response")
	}
	c.put(scopeN(1), completed(strings.Repeat("x", maxCachedBody+1), now.Add(time.Hour)), now)
	if c.get(scopeN(1), now) != nil {
		t.Fatal("cached a response larger than the bound")
	}
	inflight := completed("x", now.Add(time.Hour))
	inflight.State = StateInFlight
	c.put(scopeN(2), inflight, now)
	if c.get(scopeN(2), now) != nil {
		t.Fatal("cached an in-flight record")
	}
	var off *replayCache = newReplayCache(-1)
	off.put(a, completed("x", now.Add(time.Hour)), now)
	if off.get(a, now) != nil {
		t.Fatal("a disabled cache answered")
	}
}

// However many entries it may hold, the cache keeps at most maxCacheBytes
// of bodies, dropping the oldest first.
func TestReplayCache_ByteBudget(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newReplayCache(100000)
	body := strings.Repeat("x", maxCachedBody)
	n := maxCacheBytes/maxCachedBody + 10
	for i := range n {
		c.put(scopeN(i), completed(body, now.Add(time.Hour)), now)
	}
	if c.bytes > maxCacheBytes {
		t.Fatalf("%d body bytes held, budget %d", c.bytes, maxCacheBytes)
	}
	held := 0
	for _, e := range c.m {
		held += len(e.rec.Response.Body)
	}
	if held != c.bytes {
		t.Fatalf("byte count %d, bodies held %d", c.bytes, held)
	}
	if c.get(scopeN(0), now) != nil || c.get(scopeN(n-1), now) == nil {
		t.Fatal("the oldest were not the ones dropped")
	}
}

// An entry dropped before its turn (expired, or over the byte budget)
// leaves its ring slot behind, naming its scope. When that scope is cached
// again it takes a new slot; the old one, reached in turn, must evict
// nothing of it: the fresh entry is among the newest and stays.
func TestReplayCache_StaleSlotNeverEvictsAFreshEntry(t *testing.T) {
	now := time.Unix(1000, 0)
	soon, later := now.Add(time.Minute), now.Add(time.Hour)

	t.Run("entry bound", func(t *testing.T) {
		c := newReplayCache(3)
		c.put(scopeN(1), completed("old", soon), now) // slot 0
		c.put(scopeN(2), completed("2", later), now)  // slot 1
		if c.get(scopeN(1), soon) != nil {            // expired: dropped, slot 0 left naming key 1
			t.Fatal("served an expired record")
		}
		c.put(scopeN(1), completed("fresh", later), soon) // slot 2
		c.put(scopeN(3), completed("3", later), soon)     // the ring is full: slot 0's turn
		for i := 1; i <= 3; i++ {
			if c.get(scopeN(i), soon) == nil {
				t.Errorf("key %d evicted with %d of 3 entries held", i, len(c.m))
			}
		}
	})

	t.Run("byte budget", func(t *testing.T) {
		c := newReplayCache(100000)
		big := strings.Repeat("x", maxCachedBody)
		c.put(scopeN(0), completed("old", soon), now) // slot 0
		n := maxCacheBytes/maxCachedBody - 1
		for i := 1; i <= n; i++ {
			c.put(scopeN(i), completed(big, later), now)
		}
		if c.get(scopeN(0), soon) != nil { // expired: dropped, slot 0 left naming key 0
			t.Fatal("served an expired record")
		}
		c.put(scopeN(0), completed("fresh", later), soon)
		c.put(scopeN(n+1), completed(big, later), soon) // over the budget: the oldest go
		if c.get(scopeN(0), soon) == nil {
			t.Error("the fresh entry was dropped for the budget before older ones")
		}
		if c.get(scopeN(1), soon) != nil {
			t.Error("the oldest entry outlived the budget")
		}
	})
}
