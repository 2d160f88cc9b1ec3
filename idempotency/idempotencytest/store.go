// Package idempotencytest is the conformance suite of the idempotency
// package's stores, in the spirit of river's riverdrivertest: RunStore
// specifies a two-step idempotency.Store (Reserve, Complete, Release),
// RunTx the records a transactional store decides and writes inside the
// caller's transaction (idempotency.TxRecords). Every store the package
// ships, and sendonce's own, runs it; so can yours:
//
//	func TestMyStore(t *testing.T) {
//		idempotencytest.RunStore(t, func(t testing.TB) idempotency.Store { return newMyStore(t) })
//	}
package idempotencytest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/idempotency"
)

// RunStore runs the specification of idempotency.Store against the store
// open returns; open makes a fresh, empty one for each subtest.
func RunStore(t *testing.T, open func(t testing.TB) idempotency.Store) {
	ctx := context.Background()
	const lease = 30 * time.Second
	t0 := time.Now()
	resp := idempotency.Response{Status: 201, ContentType: "application/json", Body: []byte(`{"id":"o_1"}`)}

	reserve := func(t *testing.T, s idempotency.Store, sc idempotency.Scope, fp string, now time.Time) idempotency.Decision {
		t.Helper()
		d, err := s.Reserve(ctx, sc, fp, now, lease)
		if err != nil {
			t.Fatalf("Reserve: %v", err)
		}
		return d
	}

	t.Run("FirstRequestProceedsThenInUseOrMismatch", func(t *testing.T) {
		s := open(t)
		d := reserve(t, s, scope("k"), "fp1", t0)
		want(t, d, idempotency.Proceed)
		if d.Token == "" {
			t.Fatal("idempotency.Proceed without a token")
		}
		want(t, reserve(t, s, scope("k"), "fp1", t0.Add(time.Second)), idempotency.InUse)
		want(t, reserve(t, s, scope("k"), "fp2", t0.Add(time.Second)), idempotency.Mismatch)
	})

	t.Run("CompletedReplaysByteForByte", func(t *testing.T) {
		s := open(t)
		d := reserve(t, s, scope("k"), "fp1", t0)
		bin := idempotency.Response{Status: 422, ContentType: "application/octet-stream", Body: []byte{0, 1, 2, 0xff, '\n'}}
		if err := s.Complete(ctx, scope("k"), d.Token, bin, t0, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		r := reserve(t, s, scope("k"), "fp1", t0.Add(time.Minute))
		want(t, r, idempotency.Replay)
		if r.Response == nil || r.Response.Status != bin.Status || r.Response.ContentType != bin.ContentType || !bytes.Equal(r.Response.Body, bin.Body) {
			t.Fatalf("replayed %+v, want %+v", r.Response, bin)
		}
		want(t, reserve(t, s, scope("k"), "fp2", t0.Add(time.Minute)), idempotency.Mismatch)
	})

	t.Run("EmptyBodyReplays", func(t *testing.T) {
		s := open(t)
		d := reserve(t, s, scope("k"), "fp1", t0)
		if err := s.Complete(ctx, scope("k"), d.Token, idempotency.Response{Status: 204}, t0, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		r := reserve(t, s, scope("k"), "fp1", t0)
		want(t, r, idempotency.Replay)
		if r.Response.Status != 204 || len(r.Response.Body) != 0 {
			t.Fatalf("replayed %+v", r.Response)
		}
	})

	t.Run("CompleteWithForeignTokenIsLost", func(t *testing.T) {
		s := open(t)
		reserve(t, s, scope("k"), "fp1", t0)
		err := s.Complete(ctx, scope("k"), "not-the-token", resp, t0, t0.Add(time.Hour))
		if !errors.Is(err, idempotency.ErrReservationLost) {
			t.Fatalf("Complete = %v, want idempotency.ErrReservationLost", err)
		}
		if err := s.Complete(ctx, scope("never-reserved"), "t", resp, t0, t0.Add(time.Hour)); !errors.Is(err, idempotency.ErrReservationLost) {
			t.Fatalf("Complete without reservation = %v, want idempotency.ErrReservationLost", err)
		}
	})

	t.Run("ReleaseFreesTheKey", func(t *testing.T) {
		s := open(t)
		d := reserve(t, s, scope("k"), "fp1", t0)
		if err := s.Release(ctx, scope("k"), "not-the-token"); err != nil {
			t.Fatal(err)
		}
		want(t, reserve(t, s, scope("k"), "fp1", t0), idempotency.InUse)
		if err := s.Release(ctx, scope("k"), d.Token); err != nil {
			t.Fatal(err)
		}
		d2 := reserve(t, s, scope("k"), "fp2", t0) // a released key is new: any body
		want(t, d2, idempotency.Proceed)
		if err := s.Complete(ctx, scope("k"), d.Token, resp, t0, t0.Add(time.Hour)); !errors.Is(err, idempotency.ErrReservationLost) {
			t.Fatalf("Complete after release = %v, want idempotency.ErrReservationLost", err)
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
		want(t, reserve(t, s, scope("k"), "fp1", t0), idempotency.Replay)
	})

	t.Run("LeaseRunsOutAndIsTakenOver", func(t *testing.T) {
		s := open(t)
		old := reserve(t, s, scope("k"), "fp1", t0)
		later := t0.Add(lease + time.Second)
		d := reserve(t, s, scope("k"), "fp1", later)
		want(t, d, idempotency.Proceed)
		if d.Token == old.Token {
			t.Fatal("take-over reused the old token")
		}
		if err := s.Complete(ctx, scope("k"), old.Token, resp, later, later.Add(time.Hour)); !errors.Is(err, idempotency.ErrReservationLost) {
			t.Fatalf("old holder's Complete = %v, want idempotency.ErrReservationLost", err)
		}
		if err := s.Release(ctx, scope("k"), old.Token); err != nil {
			t.Fatal(err)
		}
		want(t, reserve(t, s, scope("k"), "fp1", later), idempotency.InUse) // the old release did nothing
		if err := s.Complete(ctx, scope("k"), d.Token, resp, later, later.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		want(t, reserve(t, s, scope("k"), "fp1", later), idempotency.Replay)
	})

	t.Run("TTLEndsReplay", func(t *testing.T) {
		s := open(t)
		d := reserve(t, s, scope("k"), "fp1", t0)
		if err := s.Complete(ctx, scope("k"), d.Token, resp, t0, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		want(t, reserve(t, s, scope("k"), "fp1", t0.Add(time.Hour-time.Second)), idempotency.Replay)
		want(t, reserve(t, s, scope("k"), "fp2", t0.Add(time.Hour)), idempotency.Proceed) // new again, any body
	})

	t.Run("ScopesDoNotMeet", func(t *testing.T) {
		s := open(t)
		base := scope("k")
		want(t, reserve(t, s, base, "fp", t0), idempotency.Proceed)
		// No ambiguity by concatenation either: acme+POST is not acmePOST+"".
		for _, sc := range append(neighbours(base), idempotency.Scope{Tenant: "acmePOST", Method: "", Route: base.Route, Key: base.Key}) {
			want(t, reserve(t, s, sc, "fp", t0), idempotency.Proceed)
		}
	})

	t.Run("ConcurrentFirstRequestsReserveOnce", func(t *testing.T) {
		s := open(t)
		const n = 16
		var wg sync.WaitGroup
		outcomes := make([]idempotency.Outcome, n)
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
			case idempotency.Proceed:
				proceeds++
			case idempotency.InUse:
			default:
				t.Fatalf("outcome %v", outcomes[i])
			}
		}
		if proceeds != 1 {
			t.Fatalf("%d requests proceeded, want 1", proceeds)
		}
	})
}

// scope is the suite's key k: one tenant, method and route.
func scope(key string) idempotency.Scope {
	return idempotency.Scope{Tenant: "acme", Method: "POST", Route: "/v1/orders", Key: key}
}

// neighbours are the scopes that differ from base in one part each
// (tenant, method, route, key): each must be a key of its own.
func neighbours(base idempotency.Scope) []idempotency.Scope {
	return []idempotency.Scope{
		{Tenant: "other", Method: base.Method, Route: base.Route, Key: base.Key},
		{Tenant: base.Tenant, Method: "PATCH", Route: base.Route, Key: base.Key},
		{Tenant: base.Tenant, Method: base.Method, Route: "/v1/orders/2", Key: base.Key},
		{Tenant: base.Tenant, Method: base.Method, Route: base.Route, Key: "k2"},
	}
}

// want fails t unless d's outcome is o.
func want(t testing.TB, d idempotency.Decision, o idempotency.Outcome) {
	t.Helper()
	if d.Outcome != o {
		t.Fatalf("outcome = %v, want %v", d.Outcome, o)
	}
}
