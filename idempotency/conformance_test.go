package idempotency

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"sync"
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

// TestStoreConformance runs the same specification against every store.
func TestStoreConformance(t *testing.T) {
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			exerciseStore(t, sc.open)
		})
	}
}

func exerciseStore(t *testing.T, open func(testing.TB) Store) {
	ctx := context.Background()
	const lease = 30 * time.Second
	t0 := time.Now()
	scope := func(key string) Scope { return Scope{Tenant: "acme", Method: "POST", Route: "/v1/orders", Key: key} }
	resp := Response{Status: 201, ContentType: "application/json", Body: []byte(`{"id":"o_1"}`)}

	reserve := func(t *testing.T, s Store, sc Scope, fp string, now time.Time) Decision {
		t.Helper()
		d, err := s.Reserve(ctx, sc, fp, now, lease)
		if err != nil {
			t.Fatalf("Reserve: %v", err)
		}
		return d
	}
	want := func(t *testing.T, d Decision, o Outcome) {
		t.Helper()
		if d.Outcome != o {
			t.Fatalf("outcome = %v, want %v", d.Outcome, o)
		}
	}

	t.Run("FirstRequestProceedsThenInUseOrMismatch", func(t *testing.T) {
		s := open(t)
		d := reserve(t, s, scope("k"), "fp1", t0)
		want(t, d, Proceed)
		if d.Token == "" {
			t.Fatal("Proceed without a token")
		}
		want(t, reserve(t, s, scope("k"), "fp1", t0.Add(time.Second)), InUse)
		want(t, reserve(t, s, scope("k"), "fp2", t0.Add(time.Second)), Mismatch)
	})

	t.Run("CompletedReplaysByteForByte", func(t *testing.T) {
		s := open(t)
		d := reserve(t, s, scope("k"), "fp1", t0)
		bin := Response{Status: 422, ContentType: "application/octet-stream", Body: []byte{0, 1, 2, 0xff, '\n'}}
		if err := s.Complete(ctx, scope("k"), d.Token, bin, t0, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		r := reserve(t, s, scope("k"), "fp1", t0.Add(time.Minute))
		want(t, r, Replay)
		if r.Response == nil || r.Response.Status != bin.Status || r.Response.ContentType != bin.ContentType || !bytes.Equal(r.Response.Body, bin.Body) {
			t.Fatalf("replayed %+v, want %+v", r.Response, bin)
		}
		want(t, reserve(t, s, scope("k"), "fp2", t0.Add(time.Minute)), Mismatch)
	})

	t.Run("EmptyBodyReplays", func(t *testing.T) {
		s := open(t)
		d := reserve(t, s, scope("k"), "fp1", t0)
		if err := s.Complete(ctx, scope("k"), d.Token, Response{Status: 204}, t0, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		r := reserve(t, s, scope("k"), "fp1", t0)
		want(t, r, Replay)
		if r.Response.Status != 204 || len(r.Response.Body) != 0 {
			t.Fatalf("replayed %+v", r.Response)
		}
	})

	t.Run("CompleteWithForeignTokenIsLost", func(t *testing.T) {
		s := open(t)
		reserve(t, s, scope("k"), "fp1", t0)
		err := s.Complete(ctx, scope("k"), "not-the-token", resp, t0, t0.Add(time.Hour))
		if !errors.Is(err, ErrReservationLost) {
			t.Fatalf("Complete = %v, want ErrReservationLost", err)
		}
		if err := s.Complete(ctx, scope("never-reserved"), "t", resp, t0, t0.Add(time.Hour)); !errors.Is(err, ErrReservationLost) {
			t.Fatalf("Complete without reservation = %v, want ErrReservationLost", err)
		}
	})

	t.Run("ReleaseFreesTheKey", func(t *testing.T) {
		s := open(t)
		d := reserve(t, s, scope("k"), "fp1", t0)
		if err := s.Release(ctx, scope("k"), "not-the-token"); err != nil {
			t.Fatal(err)
		}
		want(t, reserve(t, s, scope("k"), "fp1", t0), InUse)
		if err := s.Release(ctx, scope("k"), d.Token); err != nil {
			t.Fatal(err)
		}
		d2 := reserve(t, s, scope("k"), "fp2", t0) // a released key is new: any body
		want(t, d2, Proceed)
		if err := s.Complete(ctx, scope("k"), d.Token, resp, t0, t0.Add(time.Hour)); !errors.Is(err, ErrReservationLost) {
			t.Fatalf("Complete after release = %v, want ErrReservationLost", err)
		}
	})

	t.Run("ReleaseAfterCompleteKeepsTheResponse", func(t *testing.T) {
		s := open(t)
		d := reserve(t, s, scope("k"), "fp1", t0)
		if err := s.Complete(ctx, scope("k"), d.Token, resp, t0, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, scope("k"), d.Token); err != nil {
			t.Fatal(err)
		}
		want(t, reserve(t, s, scope("k"), "fp1", t0), Replay)
	})

	t.Run("LeaseRunsOutAndIsTakenOver", func(t *testing.T) {
		s := open(t)
		old := reserve(t, s, scope("k"), "fp1", t0)
		later := t0.Add(lease + time.Second)
		d := reserve(t, s, scope("k"), "fp1", later)
		want(t, d, Proceed)
		if d.Token == old.Token {
			t.Fatal("take-over reused the old token")
		}
		if err := s.Complete(ctx, scope("k"), old.Token, resp, later, later.Add(time.Hour)); !errors.Is(err, ErrReservationLost) {
			t.Fatalf("old holder's Complete = %v, want ErrReservationLost", err)
		}
		if err := s.Release(ctx, scope("k"), old.Token); err != nil {
			t.Fatal(err)
		}
		want(t, reserve(t, s, scope("k"), "fp1", later), InUse) // the old release did nothing
		if err := s.Complete(ctx, scope("k"), d.Token, resp, later, later.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		want(t, reserve(t, s, scope("k"), "fp1", later), Replay)
	})

	t.Run("TTLEndsReplay", func(t *testing.T) {
		s := open(t)
		d := reserve(t, s, scope("k"), "fp1", t0)
		if err := s.Complete(ctx, scope("k"), d.Token, resp, t0, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		want(t, reserve(t, s, scope("k"), "fp1", t0.Add(time.Hour-time.Second)), Replay)
		want(t, reserve(t, s, scope("k"), "fp2", t0.Add(time.Hour)), Proceed) // new again, any body
	})

	t.Run("ScopesDoNotMeet", func(t *testing.T) {
		s := open(t)
		base := scope("k")
		want(t, reserve(t, s, base, "fp", t0), Proceed)
		for _, sc := range []Scope{
			{Tenant: "other", Method: base.Method, Route: base.Route, Key: base.Key},
			{Tenant: base.Tenant, Method: "PATCH", Route: base.Route, Key: base.Key},
			{Tenant: base.Tenant, Method: base.Method, Route: "/v1/orders/2", Key: base.Key},
			{Tenant: base.Tenant, Method: base.Method, Route: base.Route, Key: "k2"},
			{Tenant: "acmePOST", Method: "", Route: base.Route, Key: base.Key}, // no ambiguity by concatenation
		} {
			want(t, reserve(t, s, sc, "fp", t0), Proceed)
		}
	})

	t.Run("ConcurrentFirstRequestsReserveOnce", func(t *testing.T) {
		s := open(t)
		const n = 16
		var wg sync.WaitGroup
		outcomes := make([]Outcome, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				d, err := s.Reserve(ctx, scope("race"), "fp", t0, lease)
				outcomes[i], errs[i] = d.Outcome, err
			})
		}
		wg.Wait()
		proceeds := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("Reserve: %v", errs[i])
			}
			switch outcomes[i] {
			case Proceed:
				proceeds++
			case InUse:
			default:
				t.Fatalf("outcome %v", outcomes[i])
			}
		}
		if proceeds != 1 {
			t.Fatalf("%d requests proceeded, want 1", proceeds)
		}
	})
}
