package idempotency

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sendonce/sendonce/idempotency/redisstore"
)

// This file reproduces the duplicate of the well-known blog-post pattern
// ("GET the cached response; SET NX a lock; run; SET the response; DEL the
// lock") and shows the package's middleware at zero duplicates under the
// same load.

// naiveKV is what the naive middleware needs from its cache.
type naiveKV interface {
	Get(ctx context.Context, k string) ([]byte, bool, error)
	SetNX(ctx context.Context, k string, ttl time.Duration) (bool, error)
	Set(ctx context.Context, k string, v []byte, ttl time.Duration) error
	Del(ctx context.Context, k string) error
}

// naiveMiddleware is the racy baseline, faithfully small. Its check and its
// lock are two steps: a request that checks before the first one stores
// its response, and locks after the first one deleted its lock, runs the
// handler a second time.
func naiveMiddleware(kv naiveKV, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			next.ServeHTTP(w, r)
			return
		}
		if body, ok, err := kv.Get(ctx, "resp:"+key); err != nil {
			w.WriteHeader(500)
			return
		} else if ok {
			w.Header().Set(ReplayedHeader, "true")
			w.WriteHeader(201)
			w.Write(body)
			return
		}
		if ok, err := kv.SetNX(ctx, "lock:"+key, 30*time.Second); err != nil || !ok {
			w.WriteHeader(http.StatusConflict)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		kv.Set(ctx, "resp:"+key, rec.Body.Bytes(), time.Hour)
		kv.Del(ctx, "lock:"+key)
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
}

// mapKV is an in-process naiveKV whose every operation costs one simulated
// network round trip, like a cache across the network.
type mapKV struct {
	rtt time.Duration
	mu  sync.Mutex
	m   map[string][]byte
}

func (k *mapKV) Get(_ context.Context, key string) ([]byte, bool, error) {
	time.Sleep(k.rtt)
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[key]
	return v, ok, nil
}

func (k *mapKV) SetNX(_ context.Context, key string, _ time.Duration) (bool, error) {
	time.Sleep(k.rtt)
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.m[key]; ok {
		return false, nil
	}
	k.m[key] = nil
	return true, nil
}

func (k *mapKV) Set(_ context.Context, key string, v []byte, _ time.Duration) error {
	time.Sleep(k.rtt)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.m[key] = v
	return nil
}

func (k *mapKV) Del(_ context.Context, key string) error {
	time.Sleep(k.rtt)
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.m, key)
	return nil
}

// redisKV is the naive pattern on a real Redis.
type redisKV struct {
	c      *redis.Client
	prefix string
}

func (k redisKV) Get(ctx context.Context, key string) ([]byte, bool, error) {
	v, err := k.c.Get(ctx, k.prefix+key).Bytes()
	if err == redis.Nil {
		return nil, false, nil
	}
	return v, err == nil, err
}

func (k redisKV) SetNX(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	return k.c.SetNX(ctx, k.prefix+key, "1", ttl).Result()
}

func (k redisKV) Set(ctx context.Context, key string, v []byte, ttl time.Duration) error {
	return k.c.Set(ctx, k.prefix+key, v, ttl).Err()
}

func (k redisKV) Del(ctx context.Context, key string) error { return k.c.Del(ctx, k.prefix+key).Err() }

// latencyStore adds the same simulated round trip to every Store call, so
// that the comparison with mapKV is fair.
type latencyStore struct {
	Store
	rtt time.Duration
}

func (s latencyStore) Reserve(ctx context.Context, sc Scope, fp string, now time.Time, lease time.Duration) (Decision, error) {
	time.Sleep(s.rtt)
	return s.Store.Reserve(ctx, sc, fp, now, lease)
}

func (s latencyStore) Complete(ctx context.Context, sc Scope, token string, resp Response, now, expires time.Time) error {
	time.Sleep(s.rtt)
	return s.Store.Complete(ctx, sc, token, resp, now, expires)
}

func (s latencyStore) Release(ctx context.Context, sc Scope, token string) error {
	time.Sleep(s.rtt)
	return s.Store.Release(ctx, sc, token)
}

// raceLoad describes the load: Keys keys, each sent by Concurrent clients
// at once (each starting within Jitter), a side effect of 5-20 ms, and
// clients that retry a 409 after a short pause.
type raceLoad struct {
	Keys, Concurrent, Parallel int
	Jitter                     time.Duration
}

func defaultRaceLoad() raceLoad {
	l := raceLoad{Keys: 500, Concurrent: 8, Parallel: 64, Jitter: 20 * time.Millisecond}
	if raceEnabled || testing.Short() {
		l.Keys = 100
	}
	return l
}

// runRaceLoad sends the load through wrap(handler) and returns how many
// side effects ran more than once (sum over keys of runs-1).
func runRaceLoad(t testing.TB, l raceLoad, wrap func(http.Handler) http.Handler) (duplicates, runs int64) {
	t.Helper()
	var mu sync.Mutex
	effects := make(map[string]int)
	h := wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The side effect: 5 to 20 ms of "charging the card".
		time.Sleep(5*time.Millisecond + rand.N(15*time.Millisecond))
		mu.Lock()
		effects[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		w.Write([]byte(`{"ok":true}`))
	}))
	var failures atomic.Int64
	keys := make(chan int)
	var workers sync.WaitGroup
	for range l.Parallel {
		workers.Go(func() {
			for k := range keys {
				key := fmt.Sprintf("key-%d", k)
				var clients sync.WaitGroup
				for range l.Concurrent {
					clients.Go(func() {
						time.Sleep(rand.N(l.Jitter))
						for range 200 { // bounded retries of 409
							r := httptest.NewRequest("POST", "/charge", strings.NewReader(`{"amount":100}`))
							r.Header.Set("Idempotency-Key", key)
							w := httptest.NewRecorder()
							h.ServeHTTP(w, r)
							if w.Code != http.StatusConflict {
								if w.Code != 201 {
									failures.Add(1)
								}
								return
							}
							time.Sleep(time.Millisecond + rand.N(3*time.Millisecond))
						}
						failures.Add(1)
					})
				}
				clients.Wait()
			}
		})
	}
	for k := range l.Keys {
		keys <- k
	}
	close(keys)
	workers.Wait()
	if n := failures.Load(); n > 0 {
		t.Errorf("%d clients never got a 201", n)
	}
	for _, n := range effects {
		runs += int64(n)
		duplicates += int64(n - 1)
	}
	if len(effects) != l.Keys {
		t.Errorf("%d keys ran, want %d", len(effects), l.Keys)
	}
	return duplicates, runs
}

// TestRace_NaiveDuplicatesPackageDoesNot: same load, same simulated cache
// latency, the naive middleware charges twice and this package never does.
func TestRace_NaiveDuplicatesPackageDoesNot(t *testing.T) {
	l := defaultRaceLoad()
	const rtt = 500 * time.Microsecond
	naiveDup, naiveRuns := runRaceLoad(t, l, func(h http.Handler) http.Handler {
		return naiveMiddleware(&mapKV{rtt: rtt, m: make(map[string][]byte)}, h)
	})
	pkgDup, pkgRuns := runRaceLoad(t, l, func(h http.Handler) http.Handler {
		return Middleware(latencyStore{Store: NewMemoryStore(), rtt: rtt}, nil)(h)
	})
	t.Logf("%d keys x %d concurrent requests, side effect 5-20 ms, store round trip %v:", l.Keys, l.Concurrent, rtt)
	t.Logf("  naive middleware:   %d duplicate side effects (%d runs)", naiveDup, naiveRuns)
	t.Logf("  idempotency.Middleware: %d duplicate side effects (%d runs)", pkgDup, pkgRuns)
	if pkgDup != 0 {
		t.Errorf("package middleware: %d duplicates, want 0", pkgDup)
	}
	if naiveDup == 0 {
		t.Errorf("the naive baseline produced no duplicate: the test no longer reproduces the race")
	}
}

// TestRace_Redis is the same comparison on a real Redis: the naive pattern
// with GET/SET NX/SET/DEL against redisstore.Store's scripts.
func TestRace_Redis(t *testing.T) {
	c := redisClient(t)
	l := defaultRaceLoad()
	naiveDup, naiveRuns := runRaceLoad(t, l, func(h http.Handler) http.Handler {
		return naiveMiddleware(redisKV{c: c, prefix: testPrefix(t, c)}, h)
	})
	pkgDup, pkgRuns := runRaceLoad(t, l, func(h http.Handler) http.Handler {
		return Middleware(redisstore.New(c, testPrefix(t, c)), nil)(h)
	})
	t.Logf("Redis, %d keys x %d concurrent requests, side effect 5-20 ms:", l.Keys, l.Concurrent)
	t.Logf("  naive middleware:   %d duplicate side effects (%d runs)", naiveDup, naiveRuns)
	t.Logf("  idempotency.Middleware: %d duplicate side effects (%d runs)", pkgDup, pkgRuns)
	if pkgDup != 0 {
		t.Errorf("package middleware: %d duplicates, want 0", pkgDup)
	}
	// The naive figure on a local Redis depends on its latency; it is
	// reported, not asserted.
}
