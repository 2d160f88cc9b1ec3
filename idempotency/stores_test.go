package idempotency

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx" database/sql driver
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // "sqlite" database/sql driver

	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

// redisEnv names the Redis URL the Redis tests use.
const redisEnv = "SENDONCE_TEST_REDIS_URL"

// storeCase is one Store implementation the conformance suite runs on.
type storeCase struct {
	name string
	open func(t testing.TB) Store
}

func storeCases() []storeCase {
	return []storeCase{
		{"memory", func(testing.TB) Store { return NewMemoryStore() }},
		{"sqlite", func(t testing.TB) Store { return openSQLite(t) }},
		{"postgres", func(t testing.TB) Store { return openPostgres(t) }},
		{"redis", func(t testing.TB) Store { return openRedis(t) }},
	}
}

// openSQLiteDB opens a fresh SQLite database in a temporary directory.
func openSQLiteDB(t testing.TB) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idem.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func openSQLite(t testing.TB) *SQLStore {
	t.Helper()
	db := openSQLiteDB(t)
	if err := Migrate(context.Background(), db, SQLite); err != nil {
		t.Fatal(err)
	}
	return NewSQLStore(db, SQLite)
}

func openPostgresDB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(20)
	// Registered after NewDatabase's cleanup, so it runs before the drop.
	t.Cleanup(func() { db.Close() })
	return db
}

func openPostgres(t testing.TB) *SQLStore {
	t.Helper()
	db := openPostgresDB(t)
	if err := Migrate(context.Background(), db, PostgreSQL); err != nil {
		t.Fatal(err)
	}
	return NewSQLStore(db, PostgreSQL)
}

// redisClient connects to SENDONCE_TEST_REDIS_URL, or skips (fails in CI).
func redisClient(t testing.TB) *redis.Client {
	t.Helper()
	u := os.Getenv(redisEnv)
	if u == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set", redisEnv)
		}
		t.Skipf("Redis tests skipped: set %s=redis://127.0.0.1:6379/0 to run them", redisEnv)
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("%s: %v", redisEnv, err)
	}
	opt.PoolSize = 64
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis at %s: %v", redisEnv, err)
	}
	return c
}

// testPrefix is a random key prefix whose keys are deleted after the test.
func testPrefix(t testing.TB, c *redis.Client) string {
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

func openRedis(t testing.TB) *RedisStore {
	t.Helper()
	c := redisClient(t)
	return NewRedisStore(c, testPrefix(t, c))
}

// StoreOpener names one store the conformance suite runs on (exported to
// the external test package, conformance_ext_test.go).
type StoreOpener struct {
	Name string
	Open func(t testing.TB) Store
}

// StoreOpeners returns every store of this package, opened fresh per call.
func StoreOpeners() []StoreOpener {
	var out []StoreOpener
	for _, sc := range storeCases() {
		out = append(out, StoreOpener{Name: sc.name, Open: sc.open})
	}
	return out
}
