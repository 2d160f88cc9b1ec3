package outbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/client"
	"github.com/sendonce/sendonce/internal/testkit/faultproxy"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/outbox"
)

// TestOutbox_LateRetryLooksTheKeyUpFirst: the first attempt's answer is
// lost after the server accepted the send; the retry comes after the
// server's key TTL, when a POST with the same key would be a NEW send. The
// outbox looks the key up first, finds the send and posts nothing.
func TestOutbox_LateRetryLooksTheKeyUpFirst(t *testing.T) {
	t.Parallel()
	clock := &sendoncetest.Clock{}
	h := startServer(t, sendoncetest.Options{Clock: clock, TTL: 24 * time.Hour})
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t)
		px := faultproxy.Start(t, faultproxy.Options{Upstream: h.env.URL, Plan: faultproxy.FirstPerKey("/v1/send", faultproxy.Drop, 2)})
		c := newClient(t, px.URL, h.env.AdminKey, func(c *client.Config) { c.MaxAttempts = 1 })
		var lookedUp []outbox.Transition
		ob := newOutbox(t, st.db, st, c, func(cfg *outbox.Config) {
			cfg.Now, cfg.KeyTTL, cfg.MaxAge = clock.Now, 24*time.Hour, 72*time.Hour
			cfg.OnTransition = func(tr outbox.Transition) {
				if tr.LookedUp {
					lookedUp = append(lookedUp, tr)
				}
			}
		})
		rec := enqueue(t, ob, st.db, 1, b.name+" late retry")[0]
		if did, err := ob.ProcessNext(bg(t)); !did || err != nil {
			t.Fatalf("ProcessNext: %v %v", did, err)
		}
		got, _ := ob.Get(bg(t), rec.ID)
		accepted, found, err := h.admin.SendByKey(bg(t), rec.IdempotencyKey)
		if got.State != outbox.Pending || err != nil || !found {
			t.Fatalf("after a dropped answer: task %s, server send found %v (%v); want pending and found", got.State, found, err)
		}

		// Control: past the TTL the server treats a known key as new.
		ctlKey := "ctl-" + st.table + "-" + b.name
		ctl := mail(9, "control")
		first, err := h.admin.Send(bg(t), &ctl, &client.SendOptions{IdempotencyKey: ctlKey})
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(25 * time.Hour)
		second, err := h.admin.Send(bg(t), &ctl, &client.SendOptions{IdempotencyKey: ctlKey})
		if err != nil || second.ID == first.ID || second.Replayed {
			t.Fatalf("control: a POST past the TTL gave %v %v; the premise of this test (a second send) does not hold", second, err)
		}

		posts := px.Count("POST", "/v1/send")
		if did, err := ob.ProcessNext(bg(t)); !did || err != nil {
			t.Fatalf("ProcessNext: %v %v", did, err)
		}
		got, _ = ob.Get(bg(t), rec.ID)
		if got.State != outbox.Sent || got.SendID != accepted.ID || len(lookedUp) != 1 {
			t.Fatalf("late retry: %s send %q (server has %s), %d look-ups; want sent by look-up", got.State, got.SendID, accepted.ID, len(lookedUp))
		}
		if n := px.Count("POST", "/v1/send") - posts; n != 0 {
			t.Fatalf("the late retry posted %d times; it must look the key up and post nothing", n)
		}
		if n := len(sendsWithKey(t, h.admin, rec.IdempotencyKey)); n != 1 {
			t.Fatalf("%d sends with the task's key, want 1", n)
		}
		t.Logf("MEASURED %s/late-retry: tasks=1 posts=%d lookups=%d sends=1 duplicates=0 (control key without look-up: 2 sends)",
			b.name, px.Count("POST", "/v1/send"), px.Count("GET", "/v1/sends"))
	})
}

func sendsWithKey(t *testing.T, c *client.Client, key string) []client.Send {
	t.Helper()
	l, err := c.ListSends(bg(t), &client.ListSendsParams{IdempotencyKey: key, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return l.Data
}

// TestOutbox_BoundsAndReconcile: attempts run out while the outcome stays
// unknown (the proxy answers 503: for task a after the server accepted, for
// task b before it saw anything). Reconcile looks each key up first: a is
// found and marked sent without a POST; b is not, goes back to pending with
// the same key, and is sent once. A task past its age bound is not attempted.
func TestOutbox_BoundsAndReconcile(t *testing.T) {
	t.Parallel()
	h := startServer(t, sendoncetest.Options{})
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t)
		keyA, keyB := "a-"+st.table+"-"+b.name, "b-"+st.table+"-"+b.name
		px := faultproxy.Start(t, faultproxy.Options{Upstream: h.env.URL, Plan: func(r faultproxy.Request) faultproxy.Fault {
			switch {
			case r.Method != "POST":
				return faultproxy.Pass
			case r.Key == keyA:
				return faultproxy.UnavailableAfter
			case r.Key == keyB:
				return faultproxy.Unavailable
			}
			return faultproxy.Pass
		}})
		c := newClient(t, px.URL, h.env.AdminKey, func(c *client.Config) { c.MaxAttempts = 1 })
		var mu sync.Mutex
		var path []string
		ob := newOutbox(t, st.db, st, c, func(cfg *outbox.Config) {
			// One worker: transitions reported by different workers may
			// interleave (see Config.OnTransition).
			cfg.Workers, cfg.MaxAttempts, cfg.RetryBase, cfg.RetryMax = 1, 2, 10*time.Millisecond, 20*time.Millisecond
			cfg.OnTransition = func(tr outbox.Transition) {
				if tr.Task.IdempotencyKey == keyA {
					mu.Lock()
					path = append(path, string(tr.From)+">"+string(tr.To))
					mu.Unlock()
				}
			}
		})
		tx, _ := st.db.BeginTx(bg(t), nil)
		a, err := ob.Enqueue(bg(t), tx, outbox.Task{Email: mail(1, "a"), IdempotencyKey: keyA})
		if err != nil {
			t.Fatal(err)
		}
		bRec, err := ob.Enqueue(bg(t), tx, outbox.Task{Email: mail(2, "b"), IdempotencyKey: keyB})
		if err != nil {
			t.Fatal(err)
		}
		_ = tx.Commit()

		recs := runUntilSettled(t, ob, []*outbox.Record{a, bRec}, 20*time.Second)
		for _, r := range recs {
			if r.State != outbox.NeedsReconciliation || r.Attempts != 2 || r.LastErrorCode != "service_unavailable" {
				t.Fatalf("task %s: %s after %d attempts (%s); want needs_reconciliation after 2", r.IdempotencyKey, r.State, r.Attempts, r.LastError)
			}
		}
		posts := px.Count("POST", "/v1/send")
		gotA, err := ob.Reconcile(bg(t), a.ID) // the look-up (a GET) passes the proxy
		if err != nil || gotA.State != outbox.Sent || gotA.SendID == "" || px.Count("POST", "/v1/send") != posts {
			t.Fatalf("reconciled a: %+v %v; want sent from the look-up, no POST", gotA, err)
		}
		px.SetPlan(nil)
		if _, err := ob.Reconcile(bg(t), a.ID); !errors.Is(err, outbox.ErrNotReconcilable) {
			t.Fatalf("Reconcile a sent task: %v; want ErrNotReconcilable", err)
		}
		gotB, err := ob.Reconcile(bg(t), bRec.ID)
		if err != nil || gotB.State != outbox.Pending || gotB.Attempts != 0 || gotB.IdempotencyKey != keyB {
			t.Fatalf("reconciled b: %+v %v; want pending, 0 attempts, the same key", gotB, err)
		}
		recs = runUntilSettled(t, ob, []*outbox.Record{a, bRec}, 20*time.Second)
		tl := h.exactlyOnce(t, recs)
		mu.Lock()
		want := "pending>sending sending>pending pending>sending sending>needs_reconciliation needs_reconciliation>sent"
		if got := strings.Join(path, " "); got != want {
			t.Errorf("transitions of a: %s\nwant %s", got, want)
		}
		mu.Unlock()

		// Age bound: a task whose deadline has passed is not attempted.
		late := newOutbox(t, st.db, st, c, func(cfg *outbox.Config) {
			cfg.Now = func() time.Time { return time.Now().Add(25 * time.Hour) }
		})
		old := enqueue(t, ob, st.db, 1, "old")[0]
		posts = px.Count("POST", "/v1/send")
		if did, err := late.ProcessNext(bg(t)); !did || err != nil {
			t.Fatalf("ProcessNext: %v %v", did, err)
		}
		gotOld, _ := ob.Get(bg(t), old.ID)
		if gotOld.State != outbox.NeedsReconciliation || px.Count("POST", "/v1/send") != posts {
			t.Fatalf("task past its age bound: %s (%s); want needs_reconciliation without a POST", gotOld.State, gotOld.LastError)
		}
		t.Logf("MEASURED %s/bounds-reconcile: tasks=2 posts=%d sends=%d duplicates=%d relayed=%d",
			b.name, px.Count("POST", "/v1/send"), tl.sends, tl.duplicates, tl.relayed)
	})
}

// TestOutbox_ShutdownReturnsTheTaskInFlight: Run's context ends while a
// POST is in flight (the proxy holds its answer). Run returns promptly, the
// task is pending again with its attempt not counted, and the next run
// sends it exactly once (the server replays).
func TestOutbox_ShutdownReturnsTheTaskInFlight(t *testing.T) {
	t.Parallel()
	h := startServer(t, sendoncetest.Options{})
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t)
		px := faultproxy.Start(t, faultproxy.Options{Upstream: h.env.URL, Delay: 10 * time.Second,
			Plan: faultproxy.FirstPerKey("/v1/send", faultproxy.Delay, 1)})
		ob := newOutbox(t, st.db, st, newClient(t, px.URL, h.env.AdminKey, func(c *client.Config) { c.Timeout = 15 * time.Second }), nil)
		rec := enqueue(t, ob, st.db, 1, b.name+" shutdown")[0]
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ob.Run(ctx) }()
		deadline := time.Now().Add(10 * time.Second)
		for px.Count("POST", "/v1/send") == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond) // the server has answered; the proxy holds it
		start := time.Now()
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return within 5s of its context ending")
		}
		stopped := time.Since(start)
		got, _ := ob.Get(bg(t), rec.ID)
		if got.State != outbox.Pending || got.Attempts != 0 || !strings.Contains(got.LastError, "shutdown") {
			t.Fatalf("after shutdown: %s, %d attempts, %q; want pending, 0, interrupted by shutdown", got.State, got.Attempts, got.LastError)
		}
		recs := runUntilSettled(t, ob, []*outbox.Record{rec}, 20*time.Second)
		tl := h.exactlyOnce(t, recs)
		t.Logf("MEASURED %s/shutdown: tasks=1 stopped-in=%v posts=%d sends=%d duplicates=%d", b.name, stopped.Round(time.Millisecond),
			px.Count("POST", "/v1/send"), tl.sends, tl.duplicates)
	})
}
