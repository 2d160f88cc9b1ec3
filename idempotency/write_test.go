package idempotency

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// book is a database of records and of the caller's own rows whose
// transactions commit all their writes or none: enough to watch what the
// protocol commits, which is the seam these tests are about.
type book struct {
	mu   sync.Mutex
	recs map[Scope]*Record
	rows int
}

type bookTx struct {
	b    *book
	puts map[Scope]*Record
	rows int
}

func newBook() *book { return &book{recs: map[Scope]*Record{}} }

func (b *book) inTx(_ context.Context, fn func(tx *bookTx) error) error {
	tx := &bookTx{b: b, puts: map[Scope]*Record{}}
	if err := fn(tx); err != nil {
		return err // rolled back: nothing of tx is kept
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for sc, rec := range tx.puts {
		b.recs[sc] = rec
	}
	b.rows += tx.rows
	return nil
}

func (t *bookTx) DecideIdempotency(_ context.Context, sc Scope, fp string, now time.Time) (Decision, error) {
	t.b.mu.Lock()
	defer t.b.mu.Unlock()
	rec := t.b.recs[sc]
	switch o := Decide(rec, fp, now); o {
	case Proceed:
		return Decision{Outcome: Proceed, Token: "tok"}, nil
	case Replay:
		return Decision{Outcome: Replay, Response: rec.Response}, nil
	default:
		return Decision{Outcome: o}, nil
	}
}

func (t *bookTx) PutIdempotency(_ context.Context, sc Scope, fp, _ string, resp Response, _, expires time.Time) error {
	t.puts[sc] = &Record{State: StateCompleted, Fingerprint: fp, ExpiresAt: expires, Response: &resp}
	return nil
}

var errInvalid = errors.New("invalid field")

// refuseInvalid makes errInvalid a stored 422 and every other error no
// answer.
func refuseInvalid(err error) (Response, bool) {
	if errors.Is(err, errInvalid) {
		return Response{Status: 422, Body: []byte(`{"error":"invalid"}`)}, true
	}
	return Response{}, false
}

// write is a Write on b whose step adds one row and answers 201, or
// fails with stepErr after adding it.
func write(b *book, sc *Scope, fp string, stepErr error) Write[*bookTx] {
	return Write[*bookTx]{
		Scope: sc, Fingerprint: fp, InTx: b.inTx, Refuse: refuseInvalid,
		Prepare: func(context.Context) (Step[*bookTx], error) {
			return func(_ context.Context, tx *bookTx) (Response, error) {
				tx.rows++
				if stepErr != nil {
					return Response{}, stepErr
				}
				return okResponse, nil
			}, nil
		},
	}
}

// The work and its answer commit together; a retry replays the answer
// and does no work; another body under the key is a mismatch.
func TestRun_CommitsTheWorkWithItsAnswerAndReplays(t *testing.T) {
	ctx := context.Background()
	b := newBook()
	e := NewEngine(Config{})
	sc := engineScope("k")
	first := Run(ctx, e, write(b, &sc, "fp", nil))
	if first.Outcome != Proceed || !first.Stored || first.Err != nil || first.Response.Status != 201 {
		t.Fatalf("first: %+v", first)
	}
	again := Run(ctx, NewEngine(Config{}), write(b, &sc, "fp", nil)) // another process: no cache
	if again.Outcome != Replay || string(again.Response.Body) != string(okResponse.Body) {
		t.Fatalf("retry: %+v, want the replay", again)
	}
	if other := Run(ctx, e, write(b, &sc, "other", nil)); other.Outcome != Mismatch {
		t.Fatalf("other body: %v, want mismatch", other.Outcome)
	}
	if b.rows != 1 {
		t.Fatalf("%d rows written, want 1", b.rows)
	}
}

// A refusal in the step rolls back the step's writes and is stored alone
// as the key's answer: the retry replays it and writes nothing.
func TestRun_RefusalRollsBackItsWritesAndIsStoredAlone(t *testing.T) {
	ctx := context.Background()
	b := newBook()
	sc := engineScope("k")
	ran := Run(ctx, NewEngine(Config{}), write(b, &sc, "fp", errInvalid))
	if !ran.Refused || !ran.Stored || !errors.Is(ran.Err, errInvalid) || ran.Response.Status != 422 {
		t.Fatalf("refused: %+v", ran)
	}
	if b.rows != 0 {
		t.Fatalf("the refused step's %d rows committed", b.rows)
	}
	again := Run(ctx, NewEngine(Config{}), write(b, &sc, "fp", nil))
	if again.Outcome != Replay || again.Response.Status != 422 || b.rows != 0 {
		t.Fatalf("retry: %+v (rows %d), want the stored 422", again, b.rows)
	}
}

// An error that is no answer (internal, or a status not stored) stores
// nothing and frees the key: the retry runs afresh.
func TestRun_FailureOrUnstoredStatusFreesTheKey(t *testing.T) {
	ctx := context.Background()
	b := newBook()
	e := NewEngine(Config{})
	sc := engineScope("k")
	failed := Run(ctx, e, write(b, &sc, "fp", errors.New("disk on fire")))
	if failed.Err == nil || failed.Refused || failed.Stored || failed.Response != nil {
		t.Fatalf("failure: %+v", failed)
	}
	conflict := write(b, &sc, "fp", nil)
	conflict.Prepare = func(context.Context) (Step[*bookTx], error) {
		return func(context.Context, *bookTx) (Response, error) { return Response{Status: 409}, nil }, nil
	}
	if r := Run(ctx, e, conflict); r.Stored || r.Response.Status != 409 {
		t.Fatalf("409: %+v, want answered and not stored", r)
	}
	if r := Run(ctx, e, write(b, &sc, "fp", nil)); r.Outcome != Proceed || !r.Stored || b.rows != 1 {
		t.Fatalf("retry: %+v (rows %d), want a fresh run", r, b.rows)
	}
}

// A step that panics ends its ticket: the next request with the key
// proceeds instead of being told the key is in use.
func TestRun_PanicReleasesTheKey(t *testing.T) {
	ctx := context.Background()
	b := newBook()
	e := NewEngine(Config{})
	sc := engineScope("k")
	w := write(b, &sc, "fp", nil)
	w.Prepare = func(context.Context) (Step[*bookTx], error) { panic("handler bug") }
	func() {
		defer func() { _ = recover() }()
		Run(ctx, e, w)
	}()
	if r := Run(ctx, e, write(b, &sc, "fp", nil)); r.Outcome != Proceed || !r.Stored {
		t.Fatalf("after a panic: %+v, want proceed", r)
	}
}

// A transaction that runs its function twice (a group commit's rerun)
// answers with the last run, and the answer of a request without a key is
// committed but kept nowhere.
func TestRun_RerunAnswersTheLastRunAndNoKeyKeepsNothing(t *testing.T) {
	ctx := context.Background()
	b := newBook()
	runs := 0
	w := Write[*bookTx]{
		Fingerprint: "fp", Refuse: refuseInvalid,
		InTx: func(ctx context.Context, fn func(*bookTx) error) error {
			_ = fn(&bookTx{b: b, puts: map[Scope]*Record{}}) // the first run is thrown away
			return b.inTx(ctx, fn)
		},
		Prepare: func(context.Context) (Step[*bookTx], error) {
			return func(context.Context, *bookTx) (Response, error) {
				runs++
				return Response{Status: 200, Body: []byte{byte('0' + runs)}}, nil
			}, nil
		},
	}
	r := Run(ctx, NewEngine(Config{}), w)
	if !r.Stored || string(r.Response.Body) != "2" {
		t.Fatalf("rerun: %+v, want the second run's answer", r)
	}
	if len(b.recs) != 0 {
		t.Fatalf("a request without a key stored %d records", len(b.recs))
	}
}

// Earlier is asked after the replay cache and before the key is decided:
// a response it finds (a record under an older form of the key) is
// replayed and nothing runs; an error stops the request; nil lets the key
// be decided as usual; a replay this process remembers never asks it.
func TestRun_EarlierReplaysARecordOfAnOlderForm(t *testing.T) {
	ctx := context.Background()
	b := newBook()
	e := NewEngine(Config{ReplayCacheEntries: 8})
	sc := engineScope("k")
	older := Response{Status: 200, Body: []byte(`{"id":"older"}`)}
	asked := 0
	w := write(b, &sc, "fp", nil)
	w.Earlier = func(context.Context) (*Response, error) { asked++; return &older, nil }
	if r := Run(ctx, e, w); r.Outcome != Replay || string(r.Response.Body) != `{"id":"older"}` || b.rows != 0 {
		t.Fatalf("with an older record: %+v, %d rows; want its replay and no work", r, b.rows)
	}
	w.Earlier = func(context.Context) (*Response, error) { asked++; return nil, errInvalid }
	if r := Run(ctx, e, w); !errors.Is(r.Err, errInvalid) || b.rows != 0 {
		t.Fatalf("a failed look: %+v, want its error and no work", r)
	}
	w.Earlier = func(context.Context) (*Response, error) { asked++; return nil, nil }
	if r := Run(ctx, e, w); r.Outcome != Proceed || b.rows != 1 {
		t.Fatalf("no older record: %+v, want the request run", r)
	}
	before := asked
	if r := Run(ctx, e, w); r.Outcome != Replay || asked != before {
		t.Fatalf("a cached replay: %+v, Earlier asked %d more times, want none", r, asked-before)
	}
}
