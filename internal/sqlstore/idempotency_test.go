package sqlstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// The store's idempotency tier beyond the conformance suite
// (conformance_test.go): reservation rows and the purge.

// putReservation writes an in-flight reservation of sc that holds its key
// until lockedUntil. The store writes none (a key is decided and stored
// inside the request's own transaction), but a database written by an
// older release may still hold some, and each must hold its key until its
// lease ends.
func putReservation(t *testing.T, s *sqlstore.Store, sc idempotency.Scope, fingerprint string, lockedUntil time.Time) {
	t.Helper()
	if _, err := s.Exec(context.Background(), `INSERT INTO idempotency_keys
		(tenant, method, route, key, fingerprint, state, token, locked_until, created_at)
		VALUES (?, ?, ?, ?, ?, 'in_flight', ?, ?, ?)`,
		sc.Tenant, sc.Method, sc.Route, sc.Key, fingerprint, idempotency.NewToken(),
		lockedUntil.UnixMicro(), lockedUntil.UnixMicro()); err != nil {
		t.Fatalf("write a reservation of %q: %v", sc.Key, err)
	}
}

// decide runs one transaction that decides sc and, on Proceed, stores
// resp as its answer (nothing when resp is nil).
func decide(t *testing.T, s *sqlstore.Store, sc idempotency.Scope, fingerprint string, now time.Time, resp *idempotency.Response) idempotency.Decision {
	t.Helper()
	d, err := tryDecide(s, sc, fingerprint, now, resp)
	if err != nil {
		t.Fatalf("decide %q: %v", sc.Key, err)
	}
	return d
}

func tryDecide(s *sqlstore.Store, sc idempotency.Scope, fingerprint string, now time.Time, resp *idempotency.Response) (idempotency.Decision, error) {
	ctx := context.Background()
	var d idempotency.Decision
	err := s.InTx(ctx, func(tx core.Tx) error {
		var err error
		if d, err = tx.DecideIdempotency(ctx, sc, fingerprint, now); err != nil || d.Outcome != idempotency.Proceed || resp == nil {
			return err
		}
		return tx.PutIdempotency(ctx, sc, fingerprint, d.Token, *resp, now, now.Add(time.Hour))
	})
	return d, err
}

// raceDecide starts n transactions at once, spread over the stores, each
// deciding sc and storing an answer when it proceeds, and counts their
// outcomes.
func raceDecide(t *testing.T, stores []*sqlstore.Store, sc idempotency.Scope, n int, now time.Time) map[idempotency.Outcome]int {
	t.Helper()
	resp := &idempotency.Response{Status: 200, ContentType: "application/json", Body: []byte(`{}`)}
	outcomes := make([]idempotency.Outcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			var d idempotency.Decision
			d, errs[i] = tryDecide(stores[i%len(stores)], sc, "fp", now, resp)
			outcomes[i] = d.Outcome
		})
	}
	close(start)
	wg.Wait()
	count := map[idempotency.Outcome]int{}
	for i, o := range outcomes {
		if errs[i] != nil {
			t.Fatalf("decide: %v", errs[i])
		}
		count[o]++
	}
	return count
}

// A reservation whose lease ran out is taken over by exactly one of the
// requests racing for its key; the others wait for it or replay it.
func TestDecideIdempotency_OneTakesOverAnExpiredReservation(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		now := time.Now()
		sc := sendScope("dead")
		putReservation(t, s, sc, "fp", now.Add(time.Second))
		if d := decide(t, s, sc, "fp", now, nil); d.Outcome != idempotency.InUse {
			t.Fatalf("within its lease: %v, want in use", d.Outcome)
		}
		c := raceDecide(t, []*sqlstore.Store{s}, sc, 16, now.Add(time.Minute))
		if c[idempotency.Proceed] != 1 || c[idempotency.InUse]+c[idempotency.Replay] != 15 {
			t.Fatalf("outcomes %v after the lease; want 1 proceed (the take-over), the rest in use or replay", c)
		}
	})
}

// The purge drops a record exactly when it is expired, by the rule every
// idempotency store drops them by (idemtype.Record.Expired): a
// reservation at the end of its lease, a completed key at the end of its
// TTL, and not a microsecond before.
func TestPurgeIdempotency_DropsExactlyTheExpiredRecords(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		now := time.Now().Truncate(time.Microsecond) // as the store keeps times
		held := sendScope("held")
		done := held
		done.Key = "done"
		putReservation(t, s, held, "fp", now.Add(time.Minute))
		resp := idempotency.Response{Status: 200, ContentType: "application/json", Body: []byte(`{"ok":true}`)}
		if d := decide(t, s, done, "fp", now, &resp); d.Outcome != idempotency.Proceed { // replays for an hour
			t.Fatalf("first request: %v, want proceed", d.Outcome)
		}
		for _, step := range []struct {
			after time.Duration
			want  int
		}{
			{time.Minute - time.Microsecond, 0},
			{time.Minute, 1}, // the reservation
			{time.Hour - time.Microsecond, 0},
			{time.Hour, 1}, // the completed key
		} {
			if n, err := s.PurgeIdempotency(ctx, now.Add(step.after)); err != nil || n != step.want {
				t.Fatalf("purge at +%v dropped %d (%v), want %d", step.after, n, err, step.want)
			}
		}
		if d := decide(t, s, done, "other", now.Add(time.Hour), nil); d.Outcome != idempotency.Proceed {
			t.Fatalf("after the purge: %v, want proceed", d.Outcome)
		}
	})
}
