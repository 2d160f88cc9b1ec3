package sqlstore_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

func open(t *testing.T, path string) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOpen_MigrationsApplyOnceAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "sendonce.db")
	s := open(t, path)
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := open(t, path) // migrations already applied: must not fail
	if _, err := s2.ListAPIKeys(context.Background()); err != nil {
		t.Fatalf("schema missing after reopen: %v", err)
	}
}

func TestInTx_PanicReleasesTheWriter(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "db"))
	ctx := context.Background()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic was swallowed")
			}
		}()
		_ = s.InTx(ctx, func(tx core.Tx) error { panic("boom") })
	}()
	done := make(chan error, 1)
	go func() { done <- s.InTx(ctx, func(tx core.Tx) error { return nil }) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the write connection is still held after a panic")
	}
}

func TestReserveIdempotency_OneWinnerUnderConcurrency(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "db"))
	ctx := context.Background()
	sc := idempotency.Scope{Tenant: "t", Method: "POST", Route: "/v1/send", Key: "k"}
	const n = 32
	outcomes := make([]idempotency.Outcome, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			d, err := s.ReserveIdempotency(ctx, sc, "fp", time.Now(), time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			outcomes[i] = d.Outcome
		}()
	}
	close(start)
	wg.Wait()
	count := map[idempotency.Outcome]int{}
	for _, o := range outcomes {
		count[o]++
	}
	if count[idempotency.Proceed] != 1 || count[idempotency.InUse] != n-1 {
		t.Fatalf("outcomes %v; want 1 proceed and %d in use", count, n-1)
	}
}

func TestIdempotency_CompleteReplayReleasePurge(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "db"))
	ctx := context.Background()
	now := time.Now()
	sc := idempotency.Scope{Tenant: "t", Method: "POST", Route: "/v1/send", Key: "k"}
	d, err := s.ReserveIdempotency(ctx, sc, "fp", now, time.Minute)
	if err != nil || d.Outcome != idempotency.Proceed {
		t.Fatalf("reserve: %v %v", d.Outcome, err)
	}
	resp := idempotency.Response{Status: 200, ContentType: "application/json", Body: []byte(`{"ok":true}` + "\n")}
	if err := s.InTx(ctx, func(tx core.Tx) error {
		return tx.CompleteIdempotency(ctx, sc, d.Token, resp, now, now.Add(time.Hour))
	}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	r, err := s.ReserveIdempotency(ctx, sc, "fp", now, time.Minute)
	if err != nil || r.Outcome != idempotency.Replay || string(r.Response.Body) != string(resp.Body) || r.Response.Status != 200 {
		t.Fatalf("replay: %+v %v", r, err)
	}
	if m, _ := s.ReserveIdempotency(ctx, sc, "other", now, time.Minute); m.Outcome != idempotency.Mismatch {
		t.Fatalf("other fingerprint: %v, want mismatch", m.Outcome)
	}
	// Completing twice with the same token fails: it is no longer in flight.
	err = s.InTx(ctx, func(tx core.Tx) error { return tx.CompleteIdempotency(ctx, sc, d.Token, resp, now, now.Add(time.Hour)) })
	if err != idempotency.ErrReservationLost {
		t.Fatalf("second complete: %v, want ErrReservationLost", err)
	}
	if n, err := s.PurgeIdempotency(ctx, now.Add(30*time.Minute)); err != nil || n != 0 {
		t.Fatalf("purge before expiry removed %d (%v)", n, err)
	}
	if n, err := s.PurgeIdempotency(ctx, now.Add(2*time.Hour)); err != nil || n != 1 {
		t.Fatalf("purge after expiry removed %d (%v), want 1", n, err)
	}
	if p, _ := s.ReserveIdempotency(ctx, sc, "other", now.Add(2*time.Hour), time.Minute); p.Outcome != idempotency.Proceed {
		t.Fatalf("after purge: %v, want proceed", p.Outcome)
	}
	// A released reservation frees the key.
	sc2 := sc
	sc2.Key = "k2"
	d2, _ := s.ReserveIdempotency(ctx, sc2, "fp", now, time.Minute)
	if err := s.ReleaseIdempotency(ctx, sc2, d2.Token); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.ReserveIdempotency(ctx, sc2, "fp", now, time.Minute); again.Outcome != idempotency.Proceed {
		t.Fatalf("after release: %v, want proceed", again.Outcome)
	}
}
