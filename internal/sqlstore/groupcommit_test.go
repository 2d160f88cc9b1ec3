package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

// gcBackends are the databases the group commit runs on: SQLite always,
// PostgreSQL when SENDONCE_TEST_POSTGRES_URL names a server (with one write
// lane, so that batches form as on SQLite).
var gcBackends = []string{"sqlite", "postgres"}

// forEachGC runs fn as a subtest per database on a store with a scratch
// table, recording the size of every batch its group commit runs.
func forEachGC(t *testing.T, fn func(t *testing.T, s *Store, sizes func() []int)) {
	t.Helper()
	for _, name := range gcBackends {
		t.Run(name, func(t *testing.T) {
			s, sizes := openGC(t, name)
			fn(t, s, sizes)
		})
	}
}

// openGC opens a store with a scratch table and records the size of every
// batch its group commit runs.
func openGC(t *testing.T, backend string) (*Store, func() []int) {
	t.Helper()
	var s *Store
	if backend == "postgres" {
		s = openPGStore(t, pgtest.NewDatabase(t), PostgresOptions{WriteLanes: 1})
	} else {
		s = openSQLiteStore(t, "gc.db")
	}
	addScratchTable(t, s)
	var (
		mu    sync.Mutex
		sizes []int
	)
	s.gc.batches = func(n int) {
		mu.Lock()
		sizes = append(sizes, n)
		mu.Unlock()
	}
	return s, func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), sizes...)
	}
}

// openPGStore opens (and migrates) the PostgreSQL database at url;
// t.Cleanup closes the store.
func openPGStore(t *testing.T, url string, opts PostgresOptions) *Store {
	t.Helper()
	s, err := OpenPostgres(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openSQLiteStore opens a fresh SQLite store in the file name of a
// directory of the test's own; t.Cleanup closes the store.
func openSQLiteStore(t *testing.T, name string) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// addScratchTable creates gc_rows, the table the group commit's tests
// write to.
func addScratchTable(t *testing.T, s *Store) {
	t.Helper()
	if _, err := s.Exec(context.Background(), `CREATE TABLE gc_rows (id TEXT PRIMARY KEY, v INTEGER NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
}

func insertRow(ctx context.Context, tx core.Tx, id string) error {
	_, err := tx.(*Tx).q.exec(ctx, `INSERT INTO gc_rows (id) VALUES (?)`, id)
	return err
}

func rowExists(t *testing.T, s *Store, id string) bool {
	t.Helper()
	var n int
	if err := s.QueryRow(context.Background(), `SELECT count(*) FROM gc_rows WHERE id = ?`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// holdWriter occupies the group commit with one transaction until the
// returned function is called, so that the transactions started meanwhile
// queue up and form one batch.
func holdWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	entered, gate := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.InTx(context.Background(), func(tx core.Tx) error {
			close(entered)
			<-gate
			return insertRow(context.Background(), tx, "holder")
		})
	}()
	<-entered
	return func() {
		close(gate)
		if err := <-done; err != nil {
			t.Errorf("holder: %v", err)
		}
	}
}

// waitQueued waits until exactly n callers of InTx are parked handing
// their requests over to the group commit. With the writer held
// (holdWriter), the next batch then takes all n, in the order they queued
// (a channel's waiting senders are served first come, first served).
//
// It reads the goroutines' states instead of a counter kept by InTx: a
// counter bumped before the hand-over counts a caller a moment before it
// is in the channel's queue, and a caller not yet in it when the writer
// is released misses the batch. A goroutine shows as [select] only once it
// is parked in InTx's select, and as [chan receive] once its request was
// taken.
func waitQueued(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := queuedCallers()
		switch {
		case got == n:
			return
		case got > n:
			t.Fatalf("%d callers queued, want %d: another test's store is busy", got, n)
		case time.Now().After(deadline):
			t.Fatalf("%d callers queued after 10s, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// queuedCallers counts the goroutines parked in groupCommit.do's select.
func queuedCallers() int {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "[select") && strings.Contains(g, "sqlstore.(*groupCommit).do(") {
			count++
		}
	}
	return count
}

// One failing transaction in a shared commit rolls back alone; the others
// in its batch commit, and each caller gets its own result.
func TestGroupCommit_FailureRollsBackAlone(t *testing.T) {
	forEachGC(t, testFailureRollsBackAlone)
}

func testFailureRollsBackAlone(t *testing.T, s *Store, sizes func() []int) {
	ctx := context.Background()
	release := holdWriter(t, s)

	const n = 12
	errBoom := errors.New("boom")
	results := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i] = s.InTx(ctx, func(tx core.Tx) error {
				if err := insertRow(ctx, tx, fmt.Sprint("row-", i)); err != nil {
					return err
				}
				if i%4 == 1 {
					return errBoom // after its insert: the insert must go too
				}
				return nil
			})
		})
	}
	waitQueued(t, n)
	release()
	wg.Wait()

	for i := range n {
		id := fmt.Sprint("row-", i)
		if i%4 == 1 {
			if !errors.Is(results[i], errBoom) {
				t.Errorf("%s: %v, want its own error", id, results[i])
			}
			if rowExists(t, s, id) {
				t.Errorf("%s: a failed transaction's insert committed", id)
			}
			continue
		}
		if results[i] != nil {
			t.Errorf("%s: %v", id, results[i])
		}
		if !rowExists(t, s, id) {
			t.Errorf("%s: a successful transaction's insert is missing", id)
		}
	}
	if m := maxOf(sizes()); m < 2 {
		t.Fatalf("batch sizes %v: the queued transactions never shared a commit", sizes())
	}
}

// A panic in one transaction of a batch is raised in its own caller and
// leaves the rest of the batch to commit.
func TestGroupCommit_PanicStaysWithItsCaller(t *testing.T) {
	forEachGC(t, testPanicStaysWithItsCaller)
}

func testPanicStaysWithItsCaller(t *testing.T, s *Store, sizes func() []int) {
	ctx := context.Background()
	release := holdWriter(t, s)

	var wg sync.WaitGroup
	var recovered any
	wg.Go(func() {
		defer func() { recovered = recover() }()
		_ = s.InTx(ctx, func(tx core.Tx) error {
			if err := insertRow(ctx, tx, "panicker"); err != nil {
				return err
			}
			panic("handler bug")
		})
	})
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			errs[i] = s.InTx(ctx, func(tx core.Tx) error { return insertRow(ctx, tx, fmt.Sprint("ok-", i)) })
		})
	}
	waitQueued(t, 1+len(errs))
	release()
	wg.Wait()

	if recovered != "handler bug" {
		t.Fatalf("caller recovered %v, want the handler's panic", recovered)
	}
	if rowExists(t, s, "panicker") {
		t.Fatal("the panicking transaction's insert committed")
	}
	for i, err := range errs {
		if err != nil || !rowExists(t, s, fmt.Sprint("ok-", i)) {
			t.Errorf("ok-%d: err %v, committed %v", i, err, rowExists(t, s, fmt.Sprint("ok-", i)))
		}
	}
	if maxOf(sizes()) < 2 {
		t.Fatalf("batch sizes %v: no shared commit was exercised", sizes())
	}
}

// A caller whose context ends while its work runs in a shared transaction
// must not interrupt that transaction: SQLite would roll back every other
// caller's work with it.
func TestGroupCommit_CancelDoesNotAbortTheBatch(t *testing.T) {
	forEachGC(t, testCancelDoesNotAbortTheBatch)
}

func testCancelDoesNotAbortTheBatch(t *testing.T, s *Store, sizes func() []int) {
	release := holdWriter(t, s)

	var wg sync.WaitGroup
	cctx, cancel := context.WithCancel(context.Background())
	var cancelledErr error
	wg.Go(func() {
		cancelledErr = s.InTx(cctx, func(tx core.Tx) error {
			// The client goes away while a statement of ours runs.
			time.AfterFunc(5*time.Millisecond, cancel)
			_, err := tx.(*Tx).q.exec(cctx, `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000)
				INSERT INTO gc_rows (id) SELECT 'cancelled' FROM c WHERE x = 200000`)
			return err
		})
	})
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			ctx := context.Background()
			errs[i] = s.InTx(ctx, func(tx core.Tx) error { return insertRow(ctx, tx, fmt.Sprint("other-", i)) })
		})
	}
	waitQueued(t, 1+len(errs))
	release()
	wg.Wait()

	for i, err := range errs {
		if err != nil || !rowExists(t, s, fmt.Sprint("other-", i)) {
			t.Errorf("other-%d: err %v: another caller's cancellation cost it its commit", i, err)
		}
	}
	// The cancelled caller's own work either committed whole (and it was
	// told so) or not at all.
	if (cancelledErr == nil) != rowExists(t, s, "cancelled") {
		t.Errorf("cancelled caller: err %v but committed=%v", cancelledErr, rowExists(t, s, "cancelled"))
	}
	if maxOf(sizes()) < 2 {
		t.Fatalf("batch sizes %v: no shared commit was exercised", sizes())
	}
}

// After Close, InTx refuses rather than hanging.
func TestGroupCommit_ClosedStoreRefuses(t *testing.T) {
	forEachGC(t, func(t *testing.T, s *Store, _ func() []int) {
		s.gc.close()
		err := s.InTx(context.Background(), func(tx core.Tx) error { return nil })
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("InTx after close: %v, want ErrClosed", err)
		}
	})
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// When a batch's commit fails, every request in it is told so — also one
// whose own answer wrote nothing (a replay may rest on another request's
// work in the same batch).
func TestGroupCommit_FailedCommitFailsEveryone(t *testing.T) {
	forEachGC(t, testFailedCommitFailsEveryone)
}

func testFailedCommitFailsEveryone(t *testing.T, s *Store, sizes func() []int) {
	ctx := context.Background()
	// A deferred foreign key is checked at COMMIT: an orphan makes the
	// commit itself fail.
	if _, err := s.Exec(ctx, `CREATE TABLE gc_child (id TEXT PRIMARY KEY,
		parent TEXT REFERENCES gc_rows (id) DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, s)
	errAnswered := errors.New("answered without writing")
	var wg sync.WaitGroup
	var orphanErr, writerErr, readerErr error
	wg.Go(func() {
		orphanErr = s.InTx(ctx, func(tx core.Tx) error {
			_, err := tx.(*Tx).q.exec(ctx, `INSERT INTO gc_child (id, parent) VALUES ('c', 'nobody')`)
			return err
		})
	})
	wg.Go(func() {
		writerErr = s.InTx(ctx, func(tx core.Tx) error { return insertRow(ctx, tx, "writer") })
	})
	wg.Go(func() {
		readerErr = s.InTx(ctx, func(tx core.Tx) error { return errAnswered })
	})
	waitQueued(t, 3)
	release()
	wg.Wait()
	if sz := sizes(); len(sz) != 2 || sz[1] != 3 {
		t.Fatalf("batch sizes %v, want [1 3]", sz)
	}
	for name, err := range map[string]error{"orphan": orphanErr, "writer": writerErr, "reader": readerErr} {
		if err == nil || errors.Is(err, errAnswered) || !strings.Contains(err.Error(), "commit") {
			t.Errorf("%s: %v, want the failed commit", name, err)
		}
	}
	if rowExists(t, s, "writer") {
		t.Fatal("a row of the failed batch committed")
	}
}

// A batch that wrote due sends wakes the claimer once, after its commit,
// and only for work that committed: a batch whose only due send rolled
// back wakes nobody.
func TestGroupCommit_WakesOncePerBatchOnlyForCommittedDueSends(t *testing.T) {
	forEachGC(t, testWakesOncePerBatch)
}

func testWakesOncePerBatch(t *testing.T, s *Store, sizes func() []int) {
	ctx := context.Background()
	var wakes atomic.Int64
	s.OnDue(func() {
		if !rowExists(t, s, "holder") {
			t.Error("woken before the batch committed")
		}
		wakes.Add(1)
	})
	due := func(tx core.Tx, id string, st core.Status) error {
		now := time.Now()
		return tx.InsertSend(ctx, &core.Send{ID: id, Tenant: "t", MailboxID: "default", Status: st,
			From: "me@example.com", MessageID: "<" + id + "@example.com>", CreatedAt: now, UpdatedAt: now})
	}
	release := holdWriter(t, s)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			_ = s.InTx(ctx, func(tx core.Tx) error {
				if err := due(tx, fmt.Sprint("snd_", i), core.StatusQueued); err != nil {
					return err
				}
				return insertRow(ctx, tx, fmt.Sprint("row-", i))
			})
		})
	}
	waitQueued(t, 6)
	release()
	wg.Wait()
	if n := wakes.Load(); n < 1 || int(n) > len(sizes())-1 {
		t.Fatalf("%d wakes for batch sizes %v: want one per batch that wrote due sends", n, sizes())
	}
	before := wakes.Load()
	err := s.InTx(ctx, func(tx core.Tx) error {
		if err := due(tx, "snd_rolled", core.StatusQueued); err != nil {
			return err
		}
		return errors.New("rolled back")
	})
	if err == nil || wakes.Load() != before {
		t.Fatalf("a rolled-back due send woke the claimer (err %v)", err)
	}
	if err := s.InTx(ctx, func(tx core.Tx) error { return due(tx, "snd_pending", core.StatusPendingApproval) }); err != nil {
		t.Fatal(err)
	}
	if wakes.Load() != before {
		t.Fatal("a send that is not due woke the claimer")
	}
}

// A batch runs without savepoints until one of its transactions fails;
// then the others run again, each in a savepoint, and each commits once.
// The failed one is not run again and none of its writes commit.
func TestGroupCommit_FailureRerunsTheOthersOnce(t *testing.T) {
	for _, name := range gcBackends {
		t.Run(name, func(t *testing.T) { testFailureRerunsTheOthersOnce(t, name) })
	}
}

func testFailureRerunsTheOthersOnce(t *testing.T, backend string) {
	for _, fail := range []bool{false, true} {
		s, sizes := openGC(t, backend)
		ctx := context.Background()
		var runs [6]atomic.Int64
		release := holdWriter(t, s)
		var wg sync.WaitGroup
		for i := range 6 {
			if i == 5 {
				// The failing one comes last in its batch: the queue is
				// first come, first served.
				waitQueued(t, 5)
			}
			wg.Go(func() {
				_ = s.InTx(ctx, func(tx core.Tx) error {
					runs[i].Add(1)
					if err := insertRow(ctx, tx, fmt.Sprint("r", i)); err != nil {
						return err
					}
					if fail && i == 5 {
						return errors.New("refused after writing")
					}
					return nil
				})
			})
		}
		waitQueued(t, 6)
		release()
		wg.Wait()
		if sz := sizes(); len(sz) != 2 || sz[1] != 6 {
			t.Fatalf("batch sizes %v, want the holder then one batch of 6", sz)
		}
		for i := range 6 {
			want, exists := int64(1), true
			if fail {
				want = 2
				if i == 5 {
					want, exists = 1, false
				}
			}
			if n := runs[i].Load(); n != want {
				t.Errorf("fail=%v: transaction %d ran %d times, want %d", fail, i, n, want)
			}
			if rowExists(t, s, fmt.Sprint("r", i)) != exists {
				t.Errorf("fail=%v: row of transaction %d committed = %v, want %v", fail, i, !exists, exists)
			}
		}
	}
}
