package ratelimit_test

import (
	"context"
	"fmt"
	"sync"
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
// it with BenchmarkRedis_Ping, a bare round trip.
func BenchmarkRedis_Take(b *testing.B) {
	rdb := redisClient(b)
	l := ratelimit.NewRedis(rdb, fmt.Sprintf("sendonce-bench:rl:%d:", time.Now().UnixNano()), nil, nil)
	ctx := context.Background()
	keys := benchKeys()
	for i := 0; b.Loop(); i++ {
		_, _ = l.Take(ctx, keys[i&63], benchLimit)
	}
}

func BenchmarkRedis_Ping(b *testing.B) {
	rdb := redisClient(b)
	ctx := context.Background()
	for b.Loop() {
		_ = rdb.Ping(ctx).Err()
	}
}

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

func benchKeys() []string {
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprint("key_", i)
	}
	return keys
}
