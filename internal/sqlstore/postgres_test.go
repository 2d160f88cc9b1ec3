package sqlstore_test

// Conformance that only PostgreSQL can show: several processes (here, several
// Stores, each with its own pool) on one database.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/sqlstore"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

func openPostgres(t *testing.T, url string) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.OpenPostgres(context.Background(), url, sqlstore.PostgresOptions{})
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Two processes racing on one key, on a fresh key and on one whose holder's
// lease ran out: exactly one proceeds, the others wait for it or replay it.
func TestPostgres_TwoProcessesRaceOneKey(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	stores := []*sqlstore.Store{openPostgres(t, url), openPostgres(t, url)}
	now := time.Now()

	fresh := sendScope("fresh")
	if c := raceDecide(t, stores, fresh, 32, now); c[idempotency.Proceed] != 1 || c[idempotency.InUse]+c[idempotency.Replay] != 31 {
		t.Fatalf("fresh key: outcomes %v; want 1 proceed, the rest in use or replay", c)
	}

	dead := sendScope("dead")
	putReservation(t, stores[0], dead, "fp", now.Add(time.Second))
	if c := raceDecide(t, stores, dead, 32, now.Add(time.Minute)); c[idempotency.Proceed] != 1 || c[idempotency.InUse]+c[idempotency.Replay] != 31 {
		t.Fatalf("expired lease: outcomes %v; want 1 take-over, the rest in use or replay", c)
	}
}

// Processes starting together on an empty database all come up: the
// migration lock makes the others wait, then find the schema applied.
func TestPostgres_ConcurrentOpensOnAnEmptyDatabase(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	const n = 4
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s, err := sqlstore.OpenPostgres(context.Background(), url, sqlstore.PostgresOptions{MaxConns: 2})
			if err != nil {
				errs[i] = err
				return
			}
			s.Close()
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
		}
	}
	s := openPostgres(t, url)
	if n, want := queryInt(t, s, "SELECT count(*) FROM sendonce_migrations"), migrations(t, "postgres"); n != want {
		t.Fatalf("%d migrations recorded, want %d, each once", n, want)
	}
}
