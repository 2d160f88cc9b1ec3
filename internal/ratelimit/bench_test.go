package ratelimit_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/ratelimit"
)

var benchLimit = ratelimit.Limit{Requests: 1 << 30, Window: time.Second}

// BenchmarkMemory_Take is the limiter's cost on every authenticated
// request without Redis; BenchmarkMap is a yardstick: one mutex-guarded
// map increment, the least such a limiter can do.
func BenchmarkMemory_Take(b *testing.B) {
	l := ratelimit.NewMemory(nil)
	ctx := context.Background()
	keys := benchKeys()
	for i := 0; b.Loop(); i++ {
		_, _ = l.Take(ctx, keys[i&63], benchLimit)
	}
}

// BenchmarkMemory_TakeParallel is BenchmarkMemory_Take from every
// GOMAXPROCS at once; BenchmarkMap_Parallel is its yardstick (a shared
// mutex-guarded map, contended alike), so the ratio is what the limiter
// costs beyond the least a shared counter can cost under contention.
func BenchmarkMemory_TakeParallel(b *testing.B) {
	l := ratelimit.NewMemory(nil)
	ctx := context.Background()
	keys := benchKeys()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			_, _ = l.Take(ctx, keys[i&63], benchLimit)
			i++
		}
	})
}

// BenchmarkRedis_Take is one round trip to Redis (an EVALSHA); compare
// it with BenchmarkRedis_Ping, a bare round trip. The limiter answers
// from memory when Redis fails (and only logs it), so a dead Redis would
// be measured as Redis: the benchmark pings first and fails on any
// warning the limiter logged.
func BenchmarkRedis_Take(b *testing.B) {
	rdb := redisClient(b)
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		b.Fatalf("redis: %v", err)
	}
	var fellBack warnings
	l := ratelimit.NewRedis(rdb, fmt.Sprintf("sendonce-bench:rl:%d:", time.Now().UnixNano()), nil, slog.New(&fellBack))
	keys := benchKeys()
	for i := 0; b.Loop(); i++ {
		if _, err := l.Take(ctx, keys[i&63], benchLimit); err != nil {
			b.Fatal(err)
		}
	}
	if n := fellBack.n.Load(); n > 0 {
		b.Fatalf("%d of %d takes fell back to memory: Redis failed", n, b.N)
	}
}

func BenchmarkRedis_Ping(b *testing.B) {
	rdb := redisClient(b)
	ctx := context.Background()
	for b.Loop() {
		if err := rdb.Ping(ctx).Err(); err != nil {
			b.Fatalf("redis: %v", err)
		}
	}
}

// warnings is a slog.Handler that counts the records of level Warn and
// above: the Redis limiter's only sign that it fell back to memory.
type warnings struct{ n atomic.Int64 }

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(context.Context, slog.Record) error    { w.n.Add(1); return nil }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler           { return w }
func (w *warnings) WithGroup(string) slog.Handler                { return w }

// BenchmarkMap is the yardstick of the in-memory limiter: one
// mutex-guarded map increment, the least such a limiter can do.
func BenchmarkMap(b *testing.B) {
	var mu sync.Mutex
	m := make(map[string]int)
	keys := benchKeys()
	for i := 0; b.Loop(); i++ {
		mu.Lock()
		m[keys[i&63]]++
		mu.Unlock()
	}
}

// BenchmarkMap_Parallel is BenchmarkMap from every GOMAXPROCS at once on
// one map and mutex: the yardstick of BenchmarkMemory_TakeParallel.
func BenchmarkMap_Parallel(b *testing.B) {
	var mu sync.Mutex
	m := make(map[string]int)
	keys := benchKeys()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			mu.Lock()
			m[keys[i&63]]++
			mu.Unlock()
			i++
		}
	})
}

func benchKeys() []string {
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprint("key_", i)
	}
	return keys
}
