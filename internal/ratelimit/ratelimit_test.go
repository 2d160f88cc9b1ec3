package ratelimit_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sendonce/sendonce/internal/ratelimit"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// start is 10 s into a minute, so windows of a minute have 50 s left.
var start = time.Date(2026, 12, 1, 10, 0, 10, 0, time.UTC)

var perMinute = ratelimit.Limit{Requests: 3, Window: time.Minute}

// limiters runs fn on the in-memory limiter and, when Redis is configured,
// on the Redis one (with a prefix of the test's own).
func limiters(t *testing.T, fn func(t *testing.T, newLimiter func(now func() time.Time) ratelimit.Limiter)) {
	t.Run("memory", func(t *testing.T) {
		fn(t, func(now func() time.Time) ratelimit.Limiter { return ratelimit.NewMemory(now) })
	})
	t.Run("redis", func(t *testing.T) {
		rdb := redisClient(t)
		prefix := fmt.Sprintf("sendonce-test:rl:%d:", time.Now().UnixNano())
		fn(t, func(now func() time.Time) ratelimit.Limiter { return ratelimit.NewRedis(rdb, prefix, now, nil) })
	})
}

func redisClient(t testing.TB) *redis.Client {
	t.Helper()
	url := os.Getenv("SENDONCE_TEST_REDIS_URL")
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("SENDONCE_TEST_REDIS_URL is not set; .ci/run sets it")
		}
		t.Skip("set SENDONCE_TEST_REDIS_URL=redis://127.0.0.1:6379/0 to run the Redis limiter's tests")
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func take(t *testing.T, l ratelimit.Limiter, key string) ratelimit.Result {
	t.Helper()
	r, err := l.Take(context.Background(), key, perMinute)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestLimiter_RefusesPastTheLimitUntilTheWindowEnds(t *testing.T) {
	limiters(t, func(t *testing.T, newLimiter func(func() time.Time) ratelimit.Limiter) {
		c := &clock{t: start}
		l := newLimiter(c.now)
		for i := 1; i <= 3; i++ {
			r := take(t, l, "k")
			if !r.Allowed || r.Limit != 3 || r.Remaining != 3-i || r.Reset != 50*time.Second {
				t.Fatalf("request %d: %+v, want allowed with %d remaining, reset 50s", i, r, 3-i)
			}
		}
		c.advance(20 * time.Second)
		if r := take(t, l, "k"); r.Allowed || r.Remaining != 0 || r.Reset != 30*time.Second {
			t.Fatalf("4th request: %+v, want refused, reset 30s", r)
		}
		c.advance(30 * time.Second) // the next window
		if r := take(t, l, "k"); !r.Allowed || r.Remaining != 2 || r.Reset != time.Minute {
			t.Fatalf("first request of the next window: %+v", r)
		}
	})
}

func TestLimiter_KeysAreCountedApart(t *testing.T) {
	limiters(t, func(t *testing.T, newLimiter func(func() time.Time) ratelimit.Limiter) {
		c := &clock{t: start}
		l := newLimiter(c.now)
		for range 4 {
			take(t, l, "a")
		}
		if r := take(t, l, "b"); !r.Allowed || r.Remaining != 2 {
			t.Fatalf("key b after key a's limit: %+v, want allowed", r)
		}
	})
}

// Two processes on one Redis share the count; two in-memory limiters
// (two processes without Redis) each count their own.
func TestRedis_TwoProcessesShareOneLimit(t *testing.T) {
	rdb := redisClient(t)
	prefix := fmt.Sprintf("sendonce-test:rl:%d:", time.Now().UnixNano())
	c := &clock{t: start}
	a, b := ratelimit.NewRedis(rdb, prefix, c.now, nil), ratelimit.NewRedis(rdb, prefix, c.now, nil)
	take(t, a, "k")
	take(t, b, "k")
	take(t, a, "k")
	if r := take(t, b, "k"); r.Allowed {
		t.Fatalf("4th request across two processes: %+v, want refused", r)
	}
	m1, m2 := ratelimit.NewMemory(c.now), ratelimit.NewMemory(c.now)
	for range 3 {
		take(t, m1, "k")
	}
	if r := take(t, m2, "k"); !r.Allowed {
		t.Fatalf("in-memory limiters share a count: %+v", r)
	}
}

// With Redis gone the process counts on its own: the limit still holds
// per process, and no request fails for it.
func TestRedis_FallsBackToMemoryWhenRedisFails(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	c := &clock{t: start}
	l := ratelimit.NewRedis(rdb, "x:", c.now, nil)
	for i := 1; i <= 3; i++ {
		if r := take(t, l, "k"); !r.Allowed {
			t.Fatalf("request %d with Redis down: %+v", i, r)
		}
	}
	if r := take(t, l, "k"); r.Allowed {
		t.Fatalf("4th request with Redis down: %+v, want refused by the fallback", r)
	}
}

// Keys of past windows are dropped once the map has grown, so a limiter
// that sees many keys once does not keep them all.
func TestMemory_DropsPastWindows(t *testing.T) {
	c := &clock{t: start}
	l := ratelimit.NewMemory(c.now)
	for i := range 1024 {
		take(t, l, fmt.Sprint("old-", i))
	}
	c.advance(time.Minute)
	take(t, l, "new")
	if n := l.Len(); n != 1 {
		t.Fatalf("%d keys kept after a sweep, want 1", n)
	}
}

func TestMemory_ConcurrentTakesCountEveryRequest(t *testing.T) {
	c := &clock{t: start}
	l := ratelimit.NewMemory(c.now)
	lim := ratelimit.Limit{Requests: 100, Window: time.Minute}
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				r, _ := l.Take(context.Background(), "k", lim)
				if r.Allowed {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if allowed != 100 {
		t.Fatalf("%d of 400 concurrent requests allowed, want exactly 100", allowed)
	}
}
