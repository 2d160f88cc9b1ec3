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

// TxStore is what RunTx needs of a transactional store.
type TxStore struct {
	// InTx runs fn in one transaction of the store: committed when fn
	// returns nil, rolled back when it returns an error.
	InTx func(ctx context.Context, fn func(tx idempotency.TxRecords) error) error
	// Lookup reads a completed record without a lock
	// (idempotency.Config.Lookup). Optional: nil skips its checks.
	Lookup func(ctx context.Context, sc idempotency.Scope) (*idempotency.Record, error)
}

var errRollback = errors.New("idempotencytest: roll back")

// RunTx runs the specification of idempotency.TxRecords against the store
// open returns; open makes a fresh, empty one for each subtest.
func RunTx(t *testing.T, open func(t testing.TB) TxStore) {
	ctx := context.Background()
	t0 := time.Now()
	bin := idempotency.Response{Status: 201, ContentType: "application/octet-stream", Body: []byte{0, 1, 2, 0xff, '\n'}}

	// decide runs one transaction: decide, and on Proceed put resp unless
	// resp is nil; rollback rolls it back whatever happened.
	try := func(s TxStore, sc idempotency.Scope, fp string, now time.Time, resp *idempotency.Response, rollback bool) (idempotency.Decision, error) {
		var d idempotency.Decision
		err := s.InTx(ctx, func(tx idempotency.TxRecords) error {
			var err error
			if d, err = tx.DecideIdempotency(ctx, sc, fp, now); err != nil {
				return err
			}
			if d.Outcome == idempotency.Proceed && resp != nil {
				if err := tx.PutIdempotency(ctx, sc, fp, d.Token, *resp, now, now.Add(time.Hour)); err != nil {
					return err
				}
			}
			if rollback {
				return errRollback
			}
			return nil
		})
		if errors.Is(err, errRollback) {
			err = nil
		}
		return d, err
	}
	decide := func(t testing.TB, s TxStore, sc idempotency.Scope, fp string, now time.Time, resp *idempotency.Response, rollback bool) idempotency.Decision {
		t.Helper()
		d, err := try(s, sc, fp, now, resp, rollback)
		if err != nil {
			t.Fatalf("InTx: %v", err)
		}
		return d
	}

	t.Run("PutCommitsAndReplaysByteForByte", func(t *testing.T) {
		s := open(t)
		d := decide(t, s, scope("k"), "fp1", t0, &bin, false)
		want(t, d, idempotency.Proceed)
		if d.Token == "" {
			t.Fatal("Proceed without a token")
		}
		r := decide(t, s, scope("k"), "fp1", t0.Add(time.Minute), nil, false)
		want(t, r, idempotency.Replay)
		if r.Response == nil || r.Response.Status != bin.Status || r.Response.ContentType != bin.ContentType || !bytes.Equal(r.Response.Body, bin.Body) {
			t.Fatalf("replayed %+v, want %+v", r.Response, bin)
		}
		want(t, decide(t, s, scope("k"), "fp2", t0.Add(time.Minute), nil, false), idempotency.Mismatch)
		if s.Lookup != nil {
			rec, err := s.Lookup(ctx, scope("k"))
			if err != nil || rec == nil || rec.State != idempotency.StateCompleted || rec.Fingerprint != "fp1" ||
				!bytes.Equal(rec.Response.Body, bin.Body) || !rec.ExpiresAt.Equal(t0.Add(time.Hour).Truncate(time.Microsecond)) {
				t.Fatalf("Lookup = %+v, %v; want the completed record", rec, err)
			}
		}
	})

	t.Run("RolledBackLeavesTheKeyNew", func(t *testing.T) {
		s := open(t)
		want(t, decide(t, s, scope("k"), "fp1", t0, &bin, true), idempotency.Proceed)
		want(t, decide(t, s, scope("k"), "fp2", t0, nil, false), idempotency.Proceed) // any body: nothing was kept
		if s.Lookup != nil {
			if rec, err := s.Lookup(ctx, scope("k")); err != nil || rec != nil {
				t.Fatalf("Lookup after a rollback = %+v, %v; want none", rec, err)
			}
		}
	})

	t.Run("TTLEndsReplayAndPutOverwrites", func(t *testing.T) {
		s := open(t)
		decide(t, s, scope("k"), "fp1", t0, &bin, false)
		want(t, decide(t, s, scope("k"), "fp1", t0.Add(time.Hour-time.Second), nil, false), idempotency.Replay)
		later := t0.Add(time.Hour)
		other := idempotency.Response{Status: 200, ContentType: "application/json", Body: []byte(`{"id":"2"}`)}
		want(t, decide(t, s, scope("k"), "fp2", later, &other, false), idempotency.Proceed) // new again, any body
		r := decide(t, s, scope("k"), "fp2", later.Add(time.Second), nil, false)
		want(t, r, idempotency.Replay)
		if !bytes.Equal(r.Response.Body, other.Body) {
			t.Fatalf("replayed %q, want the new answer %q", r.Response.Body, other.Body)
		}
	})

	t.Run("ScopesDoNotMeet", func(t *testing.T) {
		s := open(t)
		base := scope("k")
		decide(t, s, base, "fp", t0, &bin, false)
		for _, sc := range neighbours(base) {
			want(t, decide(t, s, sc, "other-fp", t0, nil, false), idempotency.Proceed)
		}
	})

	t.Run("ConcurrentFirstRequestsCommitOnce", func(t *testing.T) {
		s := open(t)
		const n = 16
		var wg sync.WaitGroup
		ds := make([]idempotency.Decision, n)
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() { ds[i], errs[i] = try(s, scope("race"), "fp", t0, &bin, false) })
		}
		wg.Wait()
		proceeds := 0
		for i, d := range ds {
			if errs[i] != nil {
				t.Fatalf("InTx: %v", errs[i])
			}
			switch d.Outcome {
			case idempotency.Proceed:
				proceeds++
			case idempotency.Replay, idempotency.InUse:
			default:
				t.Fatalf("outcome %v", d.Outcome)
			}
		}
		if proceeds != 1 {
			t.Fatalf("%d transactions proceeded, want 1", proceeds)
		}
		want(t, decide(t, s, scope("race"), "fp", t0, nil, false), idempotency.Replay)
	})
}
