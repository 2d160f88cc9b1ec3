package idempotency

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/idempotency/redisstore"
)

// countingStore counts the calls that reach the durable tier: the tests
// below are about which tier answers, which is the seam it watches.
type countingStore struct {
	Store
	reserves atomic.Int32
}

func (c *countingStore) Reserve(ctx context.Context, sc Scope, fp string, now time.Time, lease time.Duration) (Decision, error) {
	c.reserves.Add(1)
	return c.Store.Reserve(ctx, sc, fp, now, lease)
}

func engineScope(key string) Scope {
	return Scope{Tenant: "t", Method: "POST", Route: "/v1/orders", Key: key}
}

var okResponse = Response{Status: 201, ContentType: "application/json", Body: []byte(`{"id":"o_1"}`)}

// A completed key replays from the process's cache without asking the
// store; a reused one is refused the same way.
func TestEngine_ReplayCacheAnswersWithoutTheStore(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{Store: NewMemoryStore()}
	e := NewEngine(Config{Store: store, ReplayCacheEntries: 10})
	first, err := e.Begin(ctx, engineScope("k"), "fp")
	if err != nil || first.Decision.Outcome != Proceed {
		t.Fatalf("first: %v %v", first.Decision.Outcome, err)
	}
	if err := first.Complete(ctx, okResponse); err != nil {
		t.Fatal(err)
	}
	for fp, want := range map[string]Outcome{"fp": Replay, "other": Mismatch} {
		tk, err := e.Begin(ctx, engineScope("k"), fp)
		if err != nil || tk.Decision.Outcome != want {
			t.Fatalf("retry with %s: %v %v, want %v", fp, tk.Decision.Outcome, err, want)
		}
	}
	if n := store.reserves.Load(); n != 1 {
		t.Fatalf("store asked %d times, want once (the first request)", n)
	}
	// Cached gives the same answers, and nothing for a key it has not
	// seen completed.
	if d, ok := e.Cached(engineScope("k"), "fp"); !ok || d.Outcome != Replay || string(d.Response.Body) != string(okResponse.Body) {
		t.Fatalf("Cached replay: %v %v", d.Outcome, ok)
	}
	if d, ok := e.Cached(engineScope("k"), "other"); !ok || d.Outcome != Mismatch {
		t.Fatalf("Cached reuse: %v %v", d.Outcome, ok)
	}
	if _, ok := e.Cached(engineScope("never"), "fp"); ok {
		t.Fatal("Cached answered for a key it never saw")
	}
}

// While a first request runs in this process, a duplicate is answered from
// memory; once it ends, the key is the store's again.
func TestEngine_RunningFirstRequestAnswersDuplicates(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{Store: NewMemoryStore()}
	e := NewEngine(Config{Store: store})
	first, _ := e.Begin(ctx, engineScope("k"), "fp")
	for fp, want := range map[string]Outcome{"fp": InUse, "other": Mismatch} {
		if tk, _ := e.Begin(ctx, engineScope("k"), fp); tk.Decision.Outcome != want {
			t.Fatalf("duplicate with %s: %v, want %v", fp, tk.Decision.Outcome, want)
		}
	}
	if n := store.reserves.Load(); n != 1 {
		t.Fatalf("store asked %d times while the first ran, want once", n)
	}
	first.Release(ctx)
	if tk, _ := e.Begin(ctx, engineScope("k"), "other"); tk.Decision.Outcome != Proceed {
		t.Fatalf("after release: %v, want proceed", tk.Decision.Outcome)
	}
}

// A transactional engine decides in the caller's transaction; a ticket
// that proceeded and committed replays from then on.
func TestEngine_TransactionalTicketPutsInTheCallersTransaction(t *testing.T) {
	ctx := context.Background()
	recs := &memoryRecords{m: NewMemoryStore()}
	e := NewEngine(Config{Lookup: recs.lookup})
	tk, err := e.Begin(ctx, engineScope("k"), "fp")
	if err != nil || tk.Decision.Outcome != Proceed {
		t.Fatalf("begin: %v %v", tk.Decision.Outcome, err)
	}
	if d, err := tk.Decide(ctx, recs); err != nil || d.Outcome != Proceed {
		t.Fatalf("decide: %v %v", d.Outcome, err)
	}
	if err := tk.Put(ctx, recs, okResponse); err != nil {
		t.Fatal(err)
	}
	tk.Committed(ctx, nil)
	again, _ := e.Begin(ctx, engineScope("k"), "fp")
	if again.Decision.Outcome != Replay || string(again.Decision.Response.Body) != string(okResponse.Body) {
		t.Fatalf("after commit: %+v", again.Decision)
	}
}

// The issue-15 finding: a process whose answer reached the database but
// not Redis (its completion in the front store failed, or it died between
// the two) left the front's reservation behind, and every other process
// answered 409 for the whole lease. The front's InUse is now checked
// against the durable record.
func TestEngine_StaleFrontReservationDefersToTheDurableAnswer(t *testing.T) {
	ctx := context.Background()
	c := redisClient(t)
	front := redisstore.New(c, testPrefix(t, c))
	durable := openSQLite(t)
	sc := engineScope("k")
	now := time.Now()
	// The first process: reserved in both, completed in the database only.
	if d, err := front.Reserve(ctx, sc, "fp", now, time.Minute); err != nil || d.Outcome != Proceed {
		t.Fatalf("front reserve: %v %v", d.Outcome, err)
	}
	d, err := durable.Reserve(ctx, sc, "fp", now, time.Minute)
	if err != nil || d.Outcome != Proceed {
		t.Fatalf("durable reserve: %v %v", d.Outcome, err)
	}
	if err := durable.Complete(ctx, sc, d.Token, okResponse, now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// Another process.
	lookup := func(ctx context.Context, sc Scope) (*Record, error) {
		return durable.read(ctx, durable.db, durable.q["select_plain"], sc)
	}
	e := NewEngine(Config{Store: durable, Front: front, Lookup: lookup})
	tk, err := e.Begin(ctx, sc, "fp")
	if err != nil || tk.Decision.Outcome != Replay || string(tk.Decision.Response.Body) != string(okResponse.Body) {
		t.Fatalf("retry in another process: %v %v; want the database's replay, not 409", tk.Decision.Outcome, err)
	}
}

// memoryRecords is a TxRecords over a MemoryStore, for the engine's own
// tests: "transactions" that always commit.
type memoryRecords struct{ m *MemoryStore }

func (r *memoryRecords) DecideIdempotency(ctx context.Context, sc Scope, fp string, now time.Time) (Decision, error) {
	return r.m.Reserve(ctx, sc, fp, now, time.Minute)
}

func (r *memoryRecords) PutIdempotency(ctx context.Context, sc Scope, _, token string, resp Response, now, expires time.Time) error {
	return r.m.Complete(ctx, sc, token, resp, now, expires)
}

func (r *memoryRecords) lookup(_ context.Context, sc Scope) (*Record, error) {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	rec := r.m.recs[sc]
	if rec == nil || rec.State != StateCompleted {
		return nil, nil
	}
	cp := *rec
	return &cp, nil
}
