package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

// runAsBatch runs fns as one batch of s's group commit, in this order, and
// returns their answers.
func runAsBatch(s *Store, fns ...func(tx core.Tx) error) []error {
	batch := make([]*txReq, len(fns))
	for i, fn := range fns {
		batch[i] = &txReq{ctx: context.Background(), fn: fn, done: make(chan struct{})}
	}
	s.gc.runBatch(batch)
	errs := make([]error, len(fns))
	for i, r := range batch {
		<-r.done
		errs[i] = r.err
	}
	return errs
}

func testSend(id string) *core.Send {
	now := time.Now()
	return &core.Send{ID: id, Tenant: "t", MailboxID: "default", Status: core.StatusQueued,
		From: "me@example.com", MessageID: "<" + id + "@example.com>", CreatedAt: now, UpdatedAt: now}
}

// sendKey is the scope of an Idempotency-Key k of POST /v1/send.
func sendKey(k string) idempotency.Scope {
	return idempotency.Scope{Tenant: "t", Method: "POST", Route: "/v1/send", Key: k}
}

func countRows(t *testing.T, s *Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// acceptIn decides sc in tx, which must proceed (else an error naming
// what), runs between (the send's insert, a hold; nil for none) and puts
// resp under sc for an hour: the accept these tests run in their batches.
func acceptIn(ctx context.Context, tx core.Tx, what string, sc idempotency.Scope, fp string, now time.Time,
	resp idempotency.Response, between func() error) error {
	d, err := tx.DecideIdempotency(ctx, sc, fp, now)
	if err != nil || d.Outcome != idempotency.Proceed {
		return fmt.Errorf("%s: %v %v", what, d.Outcome, err)
	}
	if between != nil {
		if err := between(); err != nil {
			return err
		}
	}
	return tx.PutIdempotency(ctx, sc, fp, d.Token, resp, now, now.Add(time.Hour))
}

// A batch defers its send rows and key records to multi-row inserts; a
// later transaction of the same batch still reads them: the send by id,
// the key (decided again) as a replay.
func TestGroupCommit_DeferredRowsAreSeenByLaterTransactions(t *testing.T) {
	forEachGC(t, func(t *testing.T, s *Store, _ func() []int) {
		ctx := context.Background()
		now := time.Now()
		k1 := sendKey("k1")
		k2 := sendKey("k2")
		resp := idempotency.Response{Status: 200, ContentType: "application/json", Body: []byte(`{"id":"a"}`)}
		accept := func(sc idempotency.Scope, id string) func(core.Tx) error {
			return func(tx core.Tx) error {
				return acceptIn(ctx, tx, "decide "+sc.Key, sc, "fp", now, resp, func() error { return tx.InsertSend(ctx, testSend(id)) })
			}
		}
		var runs atomic.Int64
		errs := runAsBatch(s,
			accept(k1, "snd_a"),
			func(tx core.Tx) error {
				runs.Add(1)
				if tx.(*Tx).deferred == nil {
					return errors.New("the batch did not defer its rows")
				}
				if _, err := tx.SendForUpdate(ctx, "snd_a"); err != nil {
					return fmt.Errorf("send of an earlier transaction: %w", err)
				}
				d, err := tx.DecideIdempotency(ctx, k1, "fp", now)
				if err != nil || d.Outcome != idempotency.Replay || string(d.Response.Body) != `{"id":"a"}` {
					return fmt.Errorf("key of an earlier transaction: %v %v", d.Outcome, err)
				}
				return nil
			},
			accept(k2, "snd_b"),
		)
		for i, err := range errs {
			if err != nil {
				t.Errorf("transaction %d: %v", i, err)
			}
		}
		if runs.Load() != 1 {
			t.Errorf("the reader ran %d times, want once (no failure, no rerun)", runs.Load())
		}
		if n := countRows(t, s, `SELECT count(*) FROM sends WHERE id IN ('snd_a', 'snd_b')`); n != 2 {
			t.Errorf("%d of 2 sends committed", n)
		}
		// Each accept's record is in its send's row: one row per accepted send.
		if n := countRows(t, s, `SELECT count(*) FROM sends WHERE id IN ('snd_a', 'snd_b') AND idem_fingerprint IS NOT NULL`); n != 2 {
			t.Errorf("%d of 2 key records committed in their sends", n)
		}
		if n := countRows(t, s, `SELECT count(*) FROM idempotency_keys`); n != 0 {
			t.Errorf("%d rows in idempotency_keys for two accepted sends, want none", n)
		}
	})
}

// A deferred insert that fails (here a duplicate send id) fails only the
// transaction that wrote it: the batch runs again with savepoints.
func TestGroupCommit_FailedDeferredInsertFailsOnlyItsTransaction(t *testing.T) {
	forEachGC(t, func(t *testing.T, s *Store, _ func() []int) {
		ctx := context.Background()
		var runs [4]atomic.Int64
		insert := func(i int, id string) func(core.Tx) error {
			return func(tx core.Tx) error {
				runs[i].Add(1)
				return tx.InsertSend(ctx, testSend(id))
			}
		}
		// The last one's own statement writes the deferred rows first, and
		// meets the duplicate: not its fault.
		bystander := func(tx core.Tx) error {
			runs[3].Add(1)
			return insertRow(ctx, tx, "bystander")
		}
		errs := runAsBatch(s, insert(0, "snd_dup"), insert(1, "snd_ok"), insert(2, "snd_dup"), bystander)
		if errs[0] != nil || errs[1] != nil || errs[3] != nil {
			t.Errorf("the innocent transactions failed: %v, %v, %v", errs[0], errs[1], errs[3])
		}
		if !rowExists(t, s, "bystander") {
			t.Error("the bystander's row did not commit")
		}
		if errs[2] == nil {
			t.Error("the duplicate insert succeeded")
		}
		for i := range runs {
			if n := runs[i].Load(); n != 2 {
				t.Errorf("transaction %d ran %d times, want 2 (deferred, then in a savepoint)", i, n)
			}
		}
		if n := countRows(t, s, `SELECT count(*) FROM sends`); n != 2 {
			t.Errorf("%d sends committed, want snd_dup once and snd_ok", n)
		}
	})
}

// A caller gets its answer only once the commit that holds its work is
// done, also while a later transaction of its batch still runs.
func TestGroupCommit_AnswersOnlyAfterTheCommit(t *testing.T) {
	forEachGC(t, func(t *testing.T, s *Store, _ func() []int) {
		ctx := context.Background()
		release := holdWriter(t, s)
		first := make(chan error, 1)
		go func() { first <- s.InTx(ctx, func(tx core.Tx) error { return insertRow(ctx, tx, "first") }) }()
		waitQueued(t, 1) // first in the batch
		entered, gate := make(chan struct{}), make(chan struct{})
		second := make(chan error, 1)
		go func() {
			second <- s.InTx(ctx, func(tx core.Tx) error {
				close(entered)
				<-gate
				return insertRow(ctx, tx, "second")
			})
		}()
		waitQueued(t, 2)
		release()
		<-entered
		select {
		case err := <-first:
			t.Fatalf("first answered (%v) before its batch committed", err)
		case <-time.After(100 * time.Millisecond):
		}
		if rowExists(t, s, "first") {
			t.Fatal("first's row is visible before its batch committed")
		}
		close(gate)
		if err := <-first; err != nil || !rowExists(t, s, "first") {
			t.Fatalf("first: %v, committed %v", err, rowExists(t, s, "first"))
		}
		if err := <-second; err != nil {
			t.Fatal(err)
		}
	})
}

// openPGPair opens two stores (two processes) on one fresh database, with
// a scratch table.
func openPGPair(t *testing.T) (a, b *Store) {
	t.Helper()
	url := pgtest.NewDatabase(t)
	a, b = openPGStore(t, url, PostgresOptions{WriteLanes: 1}), openPGStore(t, url, PostgresOptions{WriteLanes: 1})
	addScratchTable(t, a)
	return a, b
}

// holdInTx runs fn in a transaction of s on another goroutine and returns
// once fn has called hold, which blocks until the test calls open; done
// answers the transaction. The test fails at once if the transaction ends
// before it holds (it never would then). open is also called at cleanup,
// so a test that fails first lets the holder end and cleanup does not
// wait for it.
func holdInTx(t *testing.T, s *Store, name string, fn func(tx core.Tx, hold func()) error) (open func(), done <-chan error) {
	t.Helper()
	held, gate := make(chan struct{}), make(chan struct{})
	var opened sync.Once
	open = func() { opened.Do(func() { close(gate) }) }
	t.Cleanup(open)
	result := make(chan error, 1)
	go func() {
		result <- s.InTx(context.Background(), func(tx core.Tx) error {
			return fn(tx, func() { close(held); <-gate })
		})
	}()
	select {
	case <-held:
	case err := <-result:
		t.Fatalf("%s ended before it held the key: %v", name, err)
	}
	return open, result
}

// Two processes' batches that lock the same rows in opposite orders
// deadlock; PostgreSQL aborts one, and that batch runs again and commits:
// no caller sees the deadlock.
func TestPostgres_BatchesRetryADeadlock(t *testing.T) {
	pgtest.URL(t)
	t.Parallel()
	a, b := openPGPair(t)
	ctx := context.Background()
	if _, err := a.Exec(ctx, `INSERT INTO gc_rows (id) VALUES ('x'), ('y')`); err != nil {
		t.Fatal(err)
	}
	bump := func(tx core.Tx, id string) error {
		_, err := tx.(*Tx).q.exec(ctx, `UPDATE gc_rows SET v = v + 1 WHERE id = ?`, id)
		return err
	}
	var (
		aHolds, bHolds = make(chan struct{}), make(chan struct{})
		aOnce, bOnce   sync.Once
		runs           atomic.Int64
		conflicted     atomic.Bool // a transaction saw the deadlock marked core.Conflicted
	)
	// wait lets the first statement of the other batch run first (the
	// retried batch finds the channel closed long ago).
	wait := func(c chan struct{}) error {
		select {
		case <-c:
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("the other batch never took its first row")
		}
	}
	batch := func(s *Store, first, second string, mine, theirs chan struct{}, once *sync.Once) []error {
		return runAsBatch(s,
			func(tx core.Tx) error {
				runs.Add(1)
				err := bump(tx, first)
				once.Do(func() { close(mine) })
				return err
			},
			func(tx core.Tx) error {
				runs.Add(1)
				if err := wait(theirs); err != nil {
					return err
				}
				err := bump(tx, second)
				if core.IsConflicted(err) {
					conflicted.Store(true)
				}
				return err
			},
		)
	}
	var errsA, errsB []error
	var wg sync.WaitGroup
	wg.Go(func() { errsA = batch(a, "x", "y", aHolds, bHolds, &aOnce) })
	wg.Go(func() { errsB = batch(b, "y", "x", bHolds, aHolds, &bOnce) })
	wg.Wait()
	for i, err := range append(errsA, errsB...) {
		if err != nil {
			t.Errorf("transaction %d: %v", i, err)
		}
	}
	if n := runs.Load(); n < 6 {
		t.Errorf("%d runs of the 4 transactions: no batch ran again after the deadlock", n)
	}
	if !conflicted.Load() {
		// A handler that answers the error instead of returning it (the
		// cancel route once did: a 500) must be able to tell it apart.
		t.Error("the deadlock's victim did not see an error marked core.Conflicted")
	}
	if n := countRows(t, a, `SELECT count(*) FROM gc_rows WHERE v = 2`); n != 2 {
		t.Errorf("%d of the 2 rows bumped once by each batch", n)
	}
}

// A key decided in one process's open batch is in use for another
// process, at once; once the first commits, the second replays it.
func TestPostgres_DuplicateInAnotherProcessIsInUseAtOnce(t *testing.T) {
	pgtest.URL(t)
	t.Parallel()
	a, b := openPGPair(t)
	ctx := context.Background()
	now := time.Now()
	sc := sendKey("dup")
	resp := idempotency.Response{Status: 200, ContentType: "application/json", Body: []byte(`{}`)}
	open, first := holdInTx(t, a, "the first transaction", func(tx core.Tx, hold func()) error {
		return acceptIn(ctx, tx, "first", sc, "fp", now, resp, func() error {
			hold()
			return tx.InsertSend(ctx, testSend("snd_first"))
		})
	})
	decide := func() idempotency.Outcome {
		var o idempotency.Outcome
		start := time.Now()
		if err := b.InTx(ctx, func(tx core.Tx) error {
			d, err := tx.DecideIdempotency(ctx, sc, "fp", now)
			o = d.Outcome
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) > 2*time.Second {
			t.Errorf("the second process waited %v for its answer", time.Since(start))
		}
		return o
	}
	if o := decide(); o != idempotency.InUse {
		t.Fatalf("while the first runs: %v, want in use", o)
	}
	open()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if o := decide(); o != idempotency.Replay {
		t.Fatalf("after the first committed: %v, want replay", o)
	}
}

// A batch writes its sends' recipient index rows as one multi-row insert
// with the send rows, not a statement per address, and they commit with
// the batch.
func TestGroupCommit_BatchIndexesRecipientsInOneStatement(t *testing.T) {
	d := &deferredRows{}
	for i := range 3 {
		d.addSend(fmt.Sprint("snd_", i), []any{i})
		for _, a := range []string{"ada@example.com", "bob@example.com"} {
			d.addAddress("t", a, fmt.Sprint("snd_", i))
		}
	}
	var inserts int
	for _, st := range d.take() {
		if strings.HasPrefix(st.sql, insertAddressHead) {
			inserts++
		}
	}
	if inserts != 1 {
		t.Errorf("%d statements for the batch's 6 recipient rows, want 1", inserts)
	}

	forEachGC(t, func(t *testing.T, s *Store, _ func() []int) {
		ctx := context.Background()
		accept := func(id string) func(core.Tx) error {
			return func(tx core.Tx) error {
				if tx.(*Tx).deferred == nil {
					return errors.New("the batch did not defer its rows")
				}
				send := testSend(id)
				send.To, send.Bcc = []string{`"Ada" <ADA@example.com>`}, []string{"bob@example.com"}
				return tx.InsertSend(ctx, send)
			}
		}
		for i, err := range runAsBatch(s, accept("snd_a"), accept("snd_b"), accept("snd_c")) {
			if err != nil {
				t.Fatalf("accept %d: %v", i, err)
			}
		}
		if n := countRows(t, s, "SELECT count(*) FROM send_addresses WHERE tenant = 't' AND address = 'ada@example.com'"); n != 3 {
			t.Errorf("%d sends indexed under ada@example.com, want 3", n)
		}
		if n := countRows(t, s, "SELECT count(*) FROM send_addresses"); n != 6 {
			t.Errorf("%d recipient rows, want 6", n)
		}
	})
}

// A PostgreSQL batch locks and reads its transactions' keys in one call
// before it runs them, and each transaction decides its key exactly as it
// would have alone: new keys proceed, a completed one replays, a completed
// one with another fingerprint is a mismatch, one another process holds is
// in use at once.
func TestPostgres_BatchLocksItsKeysInOneCall(t *testing.T) {
	pgtest.URL(t)
	t.Parallel()
	a, b := openPGPair(t)
	ctx := context.Background()
	now := time.Now()
	resp := idempotency.Response{Status: 200, ContentType: "application/json", Body: []byte(`{"id":"x"}`)}
	complete := func(s *Store, sc idempotency.Scope, fp string) error {
		return s.InTx(ctx, func(tx core.Tx) error { return acceptIn(ctx, tx, sc.Key, sc, fp, now, resp, nil) })
	}
	for _, k := range []string{"done", "done2"} {
		if err := complete(a, sendKey(k), "fp"); err != nil {
			t.Fatal(err)
		}
	}
	open, holder := holdInTx(t, b, "the holder", func(tx core.Tx, hold func()) error {
		if _, err := tx.DecideIdempotency(ctx, sendKey("held"), "fp", now); err != nil {
			return err
		}
		hold()
		return nil
	})
	want := map[string]idempotency.Outcome{"new1": idempotency.Proceed, "new2": idempotency.Proceed,
		"done": idempotency.Replay, "done2": idempotency.Mismatch, "held": idempotency.InUse}
	got := make(map[string]idempotency.Outcome)
	var batch []*txReq
	for _, k := range []string{"new1", "done", "held", "done2", "new2"} {
		fp := "fp"
		if k == "done2" {
			fp = "other"
		}
		fn := func(tx core.Tx) error {
			d, err := tx.DecideIdempotency(ctx, sendKey(k), fp, now)
			got[k] = d.Outcome
			if err != nil || d.Outcome != idempotency.Proceed {
				return err
			}
			return tx.PutIdempotency(ctx, sendKey(k), fp, d.Token, resp, now, now.Add(time.Hour))
		}
		batch = append(batch, &txReq{ctx: idempotency.WithDecisionHint(ctx, sendKey(k)), fn: fn, done: make(chan struct{})})
	}
	a.gc.runBatch(batch)
	open()
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
	for _, r := range batch {
		if r.err != nil {
			t.Errorf("transaction: %v", r.err)
		}
	}
	for k, o := range want {
		if got[k] != o {
			t.Errorf("%s: %v, want %v", k, got[k], o)
		}
	}
	if n := a.gc.prelocked.Load(); n != 5 {
		t.Errorf("%d keys locked for the batch in one call, want 5", n)
	}
	for _, k := range []string{"new1", "new2"} {
		if err := complete(b, sendKey(k), "fp"); err == nil || !strings.Contains(err.Error(), "replay") {
			t.Errorf("%s after the batch committed: %v, want a replay", k, err)
		}
	}
}

// In the savepoints a failed batch runs again in, an accept still writes
// its send holding its record with one insert (its rows deferred to the
// end of its own transaction): a database refusing every update of sends
// (an outage of the claims, say) still takes the accepts of a batch
// another transaction failed.
func TestGroupCommit_SavepointRerunStillInsertsTheRecordWithTheSend(t *testing.T) {
	forEachGC(t, func(t *testing.T, s *Store, _ func() []int) {
		ctx := context.Background()
		if s.PG != nil {
			execSQL(t, s, `CREATE FUNCTION no_updates() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RAISE EXCEPTION ''updated''; END'`,
				`CREATE TRIGGER no_updates BEFORE UPDATE ON sends FOR EACH ROW EXECUTE FUNCTION no_updates()`)
		} else {
			execSQL(t, s, `CREATE TRIGGER no_updates BEFORE UPDATE ON sends BEGIN SELECT RAISE(ABORT, 'updated'); END`)
		}
		accept := func(id string) func(core.Tx) error {
			sc := sendKey("k-" + id)
			return func(tx core.Tx) error {
				d, err := tx.DecideIdempotency(ctx, sc, "fp", time.Now())
				if err != nil {
					return err
				}
				if err := tx.InsertSend(ctx, testSend(id)); err != nil {
					return err
				}
				return tx.PutIdempotency(ctx, sc, "fp", d.Token, idempotency.Response{Status: 200, Body: []byte(`{}`)}, time.Now(), time.Now().Add(time.Hour))
			}
		}
		failing := func(tx core.Tx) error { return errors.New("refused") }
		errs := runAsBatch(s, accept("snd_a"), failing, accept("snd_b"))
		if errs[0] != nil || errs[2] != nil {
			t.Fatalf("the accepts of a batch run again in savepoints failed: %v, %v", errs[0], errs[2])
		}
		if n := countRows(t, s, `SELECT count(*) FROM sends WHERE idem_key IS NOT NULL`); n != 2 {
			t.Fatalf("%d sends hold their records, want 2", n)
		}
	})
}

func execSQL(t *testing.T, s *Store, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := s.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
