// Package redistest connects tests to the Redis server named by
// SENDONCE_TEST_REDIS_URL and gives each test key prefix of its own,
// deleted afterwards.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sendonce/sendonce/internal/testkit/daemontest"
)

// EnvVar names the Redis URL the tests use.
const EnvVar = "SENDONCE_TEST_REDIS_URL"

// URL returns EnvVar's URL, or skips the test (saying how to enable it)
// when none is set; under CI=1 a missing URL fails instead.
func URL(t testing.TB) string {
	t.Helper()
	return daemontest.EnvURL(t, EnvVar, "Redis", "redis://127.0.0.1:6379/0")
}

// Client connects to EnvVar's server, or skips the test as URL does.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(URL(t))
	if err != nil {
		t.Fatalf("%s: %v", EnvVar, err)
	}
	opt.PoolSize = 64
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis at %s: %v", EnvVar, err)
	}
	return c
}

// Prefix returns a random key prefix whose keys are deleted after the
// test.
func Prefix(t testing.TB, c *redis.Client) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "idemtest:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var cursor uint64
		for range 10_000 { // bounded: 10k batches of 1000 keys
			keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
			if err != nil {
				t.Logf("clean up redis keys: %v", err)
				return
			}
			if len(keys) > 0 {
				c.Del(ctx, keys...)
			}
			if cursor = next; cursor == 0 {
				return
			}
		}
	})
	return prefix
}
