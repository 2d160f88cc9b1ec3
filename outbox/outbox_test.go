package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/client"
	"github.com/sendonce/sendonce/internal/testkit/faultproxy"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/outbox"
)

// harness is a real sendonce server with a recording SMTP relay.
type harness struct {
	env   *sendoncetest.Env
	admin *client.Client // straight to the server, for checks
}

func startServer(t *testing.T, o sendoncetest.Options) *harness {
	t.Helper()
	o.SMTP = true
	env := sendoncetest.Start(t, o)
	return &harness{env: env, admin: newClient(t, env.URL, env.AdminKey, nil)}
}

func newClient(t *testing.T, url, key string, mod func(*client.Config)) *client.Client {
	t.Helper()
	return sendoncetest.NewClient(t, client.Config{BaseURL: url, APIKey: key, Timeout: 2 * time.Second, MaxAttempts: 2,
		BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond, MaxElapsed: 10 * time.Second}, mod)
}

func newOutbox(t *testing.T, db *sql.DB, st *store, c *client.Client, mod func(*outbox.Config)) *outbox.Outbox {
	t.Helper()
	cfg := outbox.Config{Dialect: st.dialect, Table: st.table, Client: c, Workers: 4, PollInterval: 10 * time.Millisecond,
		Lease: 5 * time.Second, RetryBase: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond, MaxAttempts: 10}
	if mod != nil {
		mod(&cfg)
	}
	ob, err := outbox.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ob
}

// proxied opens b's store with an outbox whose client reaches the server
// through a fault proxy that passes everything, to count the POSTs.
func (h *harness) proxied(t *testing.T, b backend) (*store, *faultproxy.Proxy, *outbox.Outbox) {
	t.Helper()
	st := b.open(t)
	px := faultproxy.Start(t, faultproxy.Options{Upstream: h.env.URL})
	return st, px, newOutbox(t, st.db, st, newClient(t, px.URL, h.env.AdminKey, nil), nil)
}

// onePost checks that the task was POSTed once: a rejected task is never
// retried.
func onePost(t *testing.T, px *faultproxy.Proxy) {
	t.Helper()
	if n := px.Count("POST", "/v1/send"); n != 1 {
		t.Fatalf("%d POSTs, want 1: a rejected task must not be retried", n)
	}
}

func bg(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mail(i int, tag string) client.SendRequest {
	return client.SendRequest{To: []string{fmt.Sprintf("user%d@example.com", i)}, Subject: tag, Text: fmt.Sprintf("task %d of %s", i, tag)}
}

// enqueue adds n tasks, each in its own committed transaction.
func enqueue(t *testing.T, ob *outbox.Outbox, db *sql.DB, n int, tag string) []*outbox.Record {
	t.Helper()
	var recs []*outbox.Record
	for i := range n {
		tx, err := db.BeginTx(bg(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := ob.Enqueue(bg(t), tx, outbox.Task{Email: mail(i, tag)})
		if err != nil {
			tx.Rollback()
			t.Fatalf("enqueue: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	return recs
}

// settle waits (bounded) until no task of the table is pending or sending,
// then re-reads recs. Each test has a table of its own.
func settle(t *testing.T, ob *outbox.Outbox, recs []*outbox.Record, timeout time.Duration) []*outbox.Record {
	t.Helper()
	waitCounts(t, ob, "tasks to settle", timeout, func(c map[outbox.State]int) bool { return c[outbox.Pending]+c[outbox.Sending] == 0 })
	out := make([]*outbox.Record, len(recs))
	for i, r := range recs {
		got, err := ob.Get(bg(t), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = got
	}
	return out
}

// runUntilSettled runs the outbox until every task is final, then stops it.
func runUntilSettled(t *testing.T, ob *outbox.Outbox, recs []*outbox.Record, timeout time.Duration) []*outbox.Record {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ob.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	}()
	return settle(t, ob, recs, timeout)
}

// tally is what a test measured.
type tally struct {
	tasks, sends, duplicates, relayed int
}

// exactlyOnce checks that every task is sent, that its key has exactly one
// send on the server and that the send's message reached the relay once.
func (h *harness) exactlyOnce(t *testing.T, recs []*outbox.Record) tally {
	t.Helper()
	var tl tally
	tl.tasks = len(recs)
	var mids []string
	for _, r := range recs {
		if r.State != outbox.Sent {
			t.Errorf("task %s: %s (%s %s), want sent", r.ID, r.State, r.LastErrorCode, r.LastError)
			continue
		}
		l, err := h.admin.ListSends(bg(t), &client.ListSendsParams{IdempotencyKey: r.IdempotencyKey, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		tl.sends += len(l.Data)
		if len(l.Data) != 1 {
			t.Errorf("task %s (key %s) has %d sends on the server", r.ID, r.IdempotencyKey, len(l.Data))
			tl.duplicates += max(len(l.Data)-1, 0)
			continue
		}
		if l.Data[0].ID != r.SendID {
			t.Errorf("task %s records send %s; the key's send is %s", r.ID, r.SendID, l.Data[0].ID)
		}
		mids = append(mids, strings.Trim(h.waitDelivered(t, r.SendID).MessageID, "<>"))
	}
	counts := h.env.SMTP.MessageIDCounts()
	for _, m := range mids {
		tl.relayed += counts[m]
		if counts[m] != 1 {
			t.Errorf("message %s reached the relay %d times", m, counts[m])
		}
	}
	return tl
}

func (h *harness) waitDelivered(t *testing.T, id string) *client.Send {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, err := h.admin.GetSend(bg(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if s.Status == client.StatusSent {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("send %s is %s, not delivered", id, s.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOutbox_Faults: between the outbox and a real server, the fault proxy
// breaks every POST of a task's first outbox attempt, each task with one
// kind of fault (perFault tasks per kind, all in one table, worked on
// together). The client's retries inside that attempt all fail, so the
// outbox's own retry (same key, same bytes) must finish the job. Every task
// must end sent, exactly once.
func TestOutbox_Faults(t *testing.T) {
	t.Parallel()
	h := startServer(t, sendoncetest.Options{})
	faults := []faultproxy.Fault{faultproxy.Drop, faultproxy.Delay, faultproxy.Unavailable,
		faultproxy.UnavailableAfter, faultproxy.Reset, faultproxy.ResetAfter}
	const perFault = 3
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t)
		px := faultproxy.Start(t, faultproxy.Options{Upstream: h.env.URL, Delay: 3 * time.Second})
		c := newClient(t, px.URL, h.env.AdminKey, func(c *client.Config) { c.Timeout = 1500 * time.Millisecond })
		var mu sync.Mutex
		retriedByOutbox := map[string]int{} // key → sending>pending transitions
		ob := newOutbox(t, st.db, st, c, func(c *outbox.Config) {
			c.OnTransition = func(tr outbox.Transition) {
				if tr.From == outbox.Sending && tr.To == outbox.Pending {
					mu.Lock()
					retriedByOutbox[tr.Task.IdempotencyKey]++
					mu.Unlock()
				}
			}
		})
		recs := enqueue(t, ob, st.db, perFault*len(faults), b.name+" faults")
		faultOf := map[string]faultproxy.Fault{}
		for i, r := range recs {
			faultOf[r.IdempotencyKey] = faults[i%len(faults)]
		}
		// Every POST of a key fails until the outbox has given up on its
		// first attempt (whatever the client and Go's transport retried
		// inside it); the outbox's retry then passes.
		px.SetPlan(func(r faultproxy.Request) faultproxy.Fault {
			mu.Lock()
			defer mu.Unlock()
			if r.Method == "POST" && r.Path == "/v1/send" && retriedByOutbox[r.Key] == 0 {
				return faultOf[r.Key]
			}
			return faultproxy.Pass
		})
		recs = runUntilSettled(t, ob, recs, 30*time.Second)
		log := px.Log()
		mu.Lock()
		defer mu.Unlock()
		for _, f := range faults {
			var mine []*outbox.Record
			keys := map[string]bool{}
			for _, r := range recs {
				if faultOf[r.IdempotencyKey] == f {
					mine = append(mine, r)
					keys[r.IdempotencyKey] = true
				}
			}
			tl := h.exactlyOnce(t, mine)
			posts, injected, retries := 0, 0, 0
			for _, e := range log {
				if e.Method == "POST" && keys[e.Key] {
					posts++
					if e.Fault != faultproxy.Pass {
						injected++
					}
				}
			}
			for k := range keys {
				retries += retriedByOutbox[k]
			}
			// One per task by construction; more when a passing POST is
			// slower than the client's timeout on a loaded machine.
			if retries < len(mine) {
				t.Errorf("%s: %d outbox retries after an unknown outcome, want at least one per task (%d)", f, retries, len(mine))
			}
			t.Logf("MEASURED %s/%s: tasks=%d posts=%d injected=%d outbox-retries=%d sends=%d duplicates=%d relayed=%d",
				b.name, f, tl.tasks, posts, injected, retries, tl.sends, tl.duplicates, tl.relayed)
		}
	})
}

// TestOutbox_TwoWorkersOneDatabase: two outboxes (two connection pools,
// two worker ids, two workers each) share one table. No key is ever in
// flight from two workers at once, every task is sent exactly once, and
// both outboxes get work.
func TestOutbox_TwoWorkersOneDatabase(t *testing.T) {
	t.Parallel()
	h := startServer(t, sendoncetest.Options{})
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t)
		px := faultproxy.Start(t, faultproxy.Options{Upstream: h.env.URL})
		flight := &inFlight{base: http.DefaultTransport.(*http.Transport).Clone(), cur: map[string]int{}}
		c := newClient(t, px.URL, h.env.AdminKey, func(c *client.Config) {
			c.HTTPClient, c.Timeout = &http.Client{Transport: flight}, 10*time.Second
		})
		var mu sync.Mutex
		sentBy := map[string]int{}
		track := func(name string) func(*outbox.Config) {
			return func(cfg *outbox.Config) {
				// A lease far longer than any call here: a slow server must
				// not make a task look abandoned.
				cfg.Workers, cfg.WorkerID, cfg.Lease = 2, name, 30*time.Second
				cfg.OnTransition = func(tr outbox.Transition) {
					if tr.To == outbox.Sent {
						mu.Lock()
						sentBy[name]++
						mu.Unlock()
					}
				}
			}
		}
		a := newOutbox(t, st.db, st, c, track("a"))
		bb := newOutbox(t, st.second(t), st, c, track("b"))
		const n = 16
		recs := enqueue(t, a, st.db, n, b.name+" two workers")

		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { _ = a.Run(ctx) })
		wg.Go(func() { _ = bb.Run(ctx) })
		recs = settle(t, a, recs, 30*time.Second)
		cancel()
		wg.Wait()
		tl := h.exactlyOnce(t, recs)
		posts := px.Count("POST", "/v1/send")
		for _, r := range recs {
			if r.Attempts != 1 {
				t.Errorf("task %s took %d attempts (%s)", r.ID, r.Attempts, r.LastError)
			}
		}
		if m := flight.Max(); m != 1 {
			t.Errorf("a key was in flight %d times at once", m)
		}
		mu.Lock()
		defer mu.Unlock()
		if sentBy["a"] == 0 || sentBy["b"] == 0 || sentBy["a"]+sentBy["b"] != n {
			t.Errorf("sent by a: %d, by b: %d; want both > 0, %d in all", sentBy["a"], sentBy["b"], n)
		}
		t.Logf("MEASURED %s/two-workers: tasks=%d posts=%d sent-by-a=%d sent-by-b=%d max-in-flight-per-key=%d sends=%d duplicates=%d relayed=%d",
			b.name, tl.tasks, posts, sentBy["a"], sentBy["b"], flight.Max(), tl.sends, tl.duplicates, tl.relayed)
	})
}

// inFlight is a RoundTripper that tracks, per Idempotency-Key, how many
// requests are open at once from the callers' side (until the response
// body is closed).
type inFlight struct {
	base http.RoundTripper
	mu   sync.Mutex
	cur  map[string]int
	max  int
}

func (f *inFlight) RoundTrip(r *http.Request) (*http.Response, error) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return f.base.RoundTrip(r)
	}
	f.mu.Lock()
	f.cur[key]++
	f.max = max(f.max, f.cur[key])
	f.mu.Unlock()
	done := func() {
		f.mu.Lock()
		f.cur[key]--
		f.mu.Unlock()
	}
	resp, err := f.base.RoundTrip(r)
	if err != nil {
		done()
		return nil, err
	}
	resp.Body = &closeHook{ReadCloser: resp.Body, hook: done}
	return resp, nil
}

func (f *inFlight) Max() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.max
}

type closeHook struct {
	io.ReadCloser
	once sync.Once
	hook func()
}

func (c *closeHook) Close() error {
	err := c.ReadCloser.Close()
	c.once.Do(c.hook)
	return err
}

// TestOutbox_SameKeyChangedContent: the key is already used on the server
// for another email. The task ends rejected with idempotency_key_reused,
// after one POST, with its key unchanged: no new key, no second send.
func TestOutbox_SameKeyChangedContent(t *testing.T) {
	t.Parallel()
	h := startServer(t, sendoncetest.Options{})
	forEachBackend(t, func(t *testing.T, b backend) {
		st, px, ob := h.proxied(t, b)
		key := "order-shipped-" + b.name + "-" + st.table
		orig := mail(1, "original")
		first, err := h.admin.Send(bg(t), &orig, &client.SendOptions{IdempotencyKey: key})
		if err != nil {
			t.Fatal(err)
		}

		tx, _ := st.db.BeginTx(bg(t), nil)
		rec, err := ob.Enqueue(bg(t), tx, outbox.Task{Email: mail(1, "changed"), IdempotencyKey: key})
		if err != nil {
			t.Fatal(err)
		}
		// The same key again with other content is refused at once, and
		// the transaction stays usable.
		if _, err := ob.Enqueue(bg(t), tx, outbox.Task{Email: mail(2, "changed again"), IdempotencyKey: key}); !errors.Is(err, outbox.ErrKeyReused) {
			t.Fatalf("enqueue same key, other content: %v; want ErrKeyReused", err)
		}
		// The same key with the same content is the same task.
		again, err := ob.Enqueue(bg(t), tx, outbox.Task{Email: mail(1, "changed"), IdempotencyKey: key})
		if err != nil || again.ID != rec.ID {
			t.Fatalf("enqueue the same task again: %v, %v; want task %s", again, err, rec.ID)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}

		recs := runUntilSettled(t, ob, []*outbox.Record{rec}, 20*time.Second)
		got := recs[0]
		if got.State != outbox.Rejected || got.LastErrorCode != client.CodeKeyReused || got.IdempotencyKey != key || got.SendID != "" {
			t.Fatalf("task: %s %q %q key %s send %q; want rejected idempotency_key_reused with the same key",
				got.State, got.LastErrorCode, got.LastError, got.IdempotencyKey, got.SendID)
		}
		l, err := h.admin.ListSends(bg(t), &client.ListSendsParams{IdempotencyKey: key})
		if err != nil || len(l.Data) != 1 || l.Data[0].ID != first.ID || l.Data[0].Subject != "original" {
			t.Fatalf("sends with the key: %v %v; want only the original", l, err)
		}
		onePost(t, px)
		t.Logf("MEASURED %s/same-key-changed-content: tasks=1 posts=%d sends-with-key=%d state=%s code=%s",
			b.name, px.Count("POST", "/v1/send"), len(l.Data), got.State, got.LastErrorCode)
	})
}

// TestOutbox_RejectedIsFinal: a 422 validation error is the server's final
// answer: the task is rejected after one POST and never retried.
func TestOutbox_RejectedIsFinal(t *testing.T) {
	t.Parallel()
	h := startServer(t, sendoncetest.Options{})
	forEachBackend(t, func(t *testing.T, b backend) {
		st, px, ob := h.proxied(t, b)
		tx, _ := st.db.BeginTx(bg(t), nil)
		rec, err := ob.Enqueue(bg(t), tx, outbox.Task{Email: client.SendRequest{To: []string{"not an address"}, Subject: "x", Text: "y"}})
		if err != nil {
			t.Fatal(err)
		}
		_ = tx.Commit()
		got := runUntilSettled(t, ob, []*outbox.Record{rec}, 20*time.Second)[0]
		if got.State != outbox.Rejected || got.LastErrorCode != client.CodeValidation || got.Attempts != 1 {
			t.Fatalf("task %s %q attempts %d; want rejected validation_error after 1", got.State, got.LastErrorCode, got.Attempts)
		}
		onePost(t, px)
	})
}

// TestOutbox_EnqueueIsTransactional: the task commits or rolls back with the
// business change; nothing is sent from inside the caller's transaction.
func TestOutbox_EnqueueIsTransactional(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t)
		ob := newOutbox(t, st.db, st, nil, nil)
		users := st.table + "_users"
		if _, err := st.db.Exec("CREATE TABLE " + users + " (id TEXT PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		signUp := func(id string, commit bool) *outbox.Record {
			tx, err := st.db.BeginTx(bg(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(st.rebind("INSERT INTO "+users+" (id) VALUES (?)"), id); err != nil {
				t.Fatal(err)
			}
			rec, err := ob.Enqueue(bg(t), tx, outbox.Task{Email: client.SendRequest{To: []string{id + "@example.com"}, Subject: "Welcome", Text: "Hi"}})
			if err != nil {
				t.Fatal(err)
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			return rec
		}
		kept := signUp("ada", true)
		lost := signUp("bob", false)
		if got, err := ob.Get(bg(t), kept.ID); err != nil || got.State != outbox.Pending || got.Attempts != 0 || !uuidV4(got.IdempotencyKey) {
			t.Fatalf("committed task: %+v %v; want pending, not attempted, a UUID v4 key", got, err)
		}
		if _, err := ob.Get(bg(t), lost.ID); !errors.Is(err, outbox.ErrNotFound) {
			t.Fatalf("rolled-back task: %v; want ErrNotFound", err)
		}
		e, err := kept.Email()
		if err != nil || e.To[0] != "ada@example.com" {
			t.Fatalf("frozen email: %+v %v", e, err)
		}
		if _, err := ob.ProcessNext(bg(t)); err == nil {
			t.Fatal("ProcessNext without a client: want an error")
		}
	})
}

func uuidV4(s string) bool {
	return len(s) == 36 && s[14] == '4' && strings.Count(s, "-") == 4
}
