package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sendonce/sendonce/internal/core"
)

// ErrClosed is returned by InTx once the store is closing.
var ErrClosed = errors.New("store is closed")

// DefaultMaxBatch bounds how many write transactions one commit carries.
// Larger batches stop paying off once the commit is shared by a few dozen;
// the bound keeps one batch's latency small.
const DefaultMaxBatch = 64

// maxBatchTries bounds how often a batch that met a deadlock or a
// serialization failure (PostgreSQL) runs again before its callers are
// told.
const maxBatchTries = 5

// groupCommit runs the write transactions of many goroutines in shared
// database transactions: one commit (one fsync) for a batch instead of one
// per request.
//
// Batches form naturally, without an added delay: while one batch commits,
// the transactions that arrive wait and make up the next one. A batch first
// runs without savepoints; when one of its transactions fails, it all rolls
// back and the others run again, each in a SAVEPOINT of its own, so one that
// fails rolls back alone. Each caller returns only after the batch that
// holds its work has committed, so durability is exactly that of a
// transaction of its own.
//
// SQLite has one lane (its one writer); PostgreSQL has a few, each batch
// on a connection of its own. There, two processes' batches can deadlock
// on each other's rows: the batch that PostgreSQL picks as the victim runs
// again from the start (maxBatchTries).
type groupCommit struct {
	store *Store
	begin func(ctx context.Context) (batchTx, error)
	reqs  chan *txReq // unbuffered: a request received is always answered
	// low carries background writes (core.Background): a batch takes at
	// most backgroundShare of them per foreground write it holds, and
	// fills with them when no foreground write waits.
	low      chan *txReq
	maxBatch int
	// deferRows: the batch's send rows and key records wait in deferredRows
	// and are written as multi-row statements.
	deferRows bool
	stop      chan struct{}
	stopOnce  sync.Once
	stopped   sync.WaitGroup
	batches   func(n int)  // observes batch sizes (metrics, tests); may be nil
	prelocked atomic.Int64 // keys locked for their batch in one call (tests)
}

// batchTx is the database transaction a batch shares. commit writes the
// batch's deferred rows, then commits; it tells a failure to write them
// (flushErr: the transaction is still open) from a failed commit.
type batchTx struct {
	q        querier
	commit   func(ctx context.Context, d *deferredRows) (flushErr, err error)
	rollback func()
}

// ObserveGroupCommits has fn called with the number of transactions of
// every batch (for metrics). Call it once, before the store is used.
func (s *Store) ObserveGroupCommits(fn func(n int)) {
	if s.gc != nil {
		s.gc.batches = fn
	}
}

type txReq struct {
	ctx      context.Context
	fn       func(core.Tx) error
	err      error
	panicked any
	pending  bool // fn succeeded; its fate is the batch's commit
	done     chan struct{}
}

func newGroupCommit(s *Store, maxBatch, lanes int, deferRows bool, begin func(context.Context) (batchTx, error)) *groupCommit {
	if maxBatch < 1 {
		maxBatch = DefaultMaxBatch
	}
	g := &groupCommit{
		store: s, begin: begin, reqs: make(chan *txReq), low: make(chan *txReq), maxBatch: maxBatch, deferRows: deferRows,
		stop: make(chan struct{}),
	}
	for range max(1, lanes) {
		g.stopped.Go(g.run)
	}
	return g
}

// do runs fn in the next batch and returns once that batch has committed
// or fn's part of it has rolled back. A panic in fn is raised again here,
// in the caller's goroutine.
func (g *groupCommit) do(ctx context.Context, fn func(core.Tx) error) error {
	r := &txReq{ctx: ctx, fn: fn, done: make(chan struct{})}
	line := g.reqs
	if core.IsBackground(ctx) {
		line = g.low
	}
	select {
	case line <- r:
	case <-g.stop:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Received: the answer always comes, and must be waited for even when
	// ctx ends, since the work may commit.
	<-r.done
	if r.panicked != nil {
		panic(r.panicked)
	}
	return r.err
}

func (g *groupCommit) close() {
	g.stopOnce.Do(func() { close(g.stop) })
	g.stopped.Wait()
}

func (g *groupCommit) run() {
	batch := make([]*txReq, 0, g.maxBatch+g.maxBatch/backgroundShare+1)
	for {
		select {
		case r := <-g.reqs:
			batch = append(batch[:0], r)
		case r := <-g.low:
			batch = append(batch[:0], r)
		case <-g.stop:
			return
		}
		batch = g.fill(batch)
		g.runBatch(batch)
		clear(batch) // let the finished requests go
	}
}

// backgroundShare bounds a batch's background writes: at most one for
// every backgroundShare foreground writes it holds (and at least one).
// On SQLite's one writer, delivery's claims and outcome records took as
// much of the writer as the accepts did; waiting accepts now come first,
// and delivery still moves in every batch.
const backgroundShare = 4

// fill adds to batch (holding its first request) the writes waiting now:
// every foreground one up to maxBatch, then background ones within their
// share.
func (g *groupCommit) fill(batch []*txReq) []*txReq {
	fg := 0
	if !core.IsBackground(batch[0].ctx) {
		fg = 1
	}
fg:
	for len(batch) < g.maxBatch {
		select {
		case r := <-g.reqs:
			batch, fg = append(batch, r), fg+1
		default:
			break fg
		}
	}
	room := g.maxBatch - len(batch)
	if fg > 0 {
		room = max(1, fg/backgroundShare) - (len(batch) - fg)
	}
	for ; room > 0; room-- {
		select {
		case r := <-g.low:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// batchEnd is how one run of a batch ended.
type batchEnd int

const (
	batchDone  batchEnd = iota // committed, or every request has its answer
	batchRerun                 // a transaction failed: run the others in savepoints
	batchRetry                 // deadlock or serialization failure: run it all again
)

func (g *groupCommit) runBatch(batch []*txReq) {
	defer func() {
		for _, r := range batch {
			close(r.done)
		}
	}()
	if g.batches != nil {
		g.batches(len(batch))
	}
	// Optimistic first: no savepoints, which cost two statements each (and
	// on SQLite a copy of every page a transaction touches).
	savepoints := false
	for try := 1; ; try++ {
		end, cause := g.runTxs(batch, savepoints)
		switch end {
		case batchDone:
			return
		case batchRerun:
			savepoints = true
		case batchRetry:
			if try == maxBatchTries {
				// Nothing committed; the caller may simply retry (503).
				failAll(batch, core.Unavailable(fmt.Errorf("gave up after %d tries: %w", try, cause)))
				return
			}
		}
		// Nothing of this run committed. Those that failed on their own keep
		// their answer; the deadlock's victim and the rest run again.
		for _, r := range batch {
			if r.pending || (r.err != nil && retryable(r.err)) {
				r.pending, r.err = false, nil
			}
		}
	}
}

// runTxs runs the batch's transactions (those that have no answer yet) in
// one database transaction and commits it. With savepoints, a transaction
// that fails is undone alone; without, the first failure rolls everything
// back and runTxs reports batchRerun: the others' work may have read the
// failed one's writes, so they all run again.
func (g *groupCommit) runTxs(batch []*txReq, savepoints bool) (batchEnd, error) {
	// Not a caller's context: one caller going away must not cancel the
	// transaction the others share (and the querier is detached: SQLite
	// rolls the whole transaction back when a statement is interrupted).
	ctx := context.Background()
	btx, err := g.begin(ctx)
	if err != nil {
		failAll(batch, fmt.Errorf("begin: %w", err))
		return batchDone, nil
	}
	locks, err := g.locksFor(ctx, btx.q, batch)
	if err != nil {
		btx.rollback()
		if retryable(err) {
			return batchRetry, err
		}
		failAll(batch, err)
		return batchDone, nil
	}
	// A batch of one defers too: its send row waits for the request's
	// record to be filled in (sendrecord.go), so an accept is one insert.
	var deferred *deferredRows
	if g.deferRows && !savepoints {
		deferred = &deferredRows{}
	}
	savepoints = savepoints && len(batch) > 1
	woke, hooked := false, false
	for _, r := range batch {
		if r.err != nil || r.panicked != nil {
			continue // answered by an earlier run
		}
		if err := r.ctx.Err(); err != nil {
			r.err = err // its caller left before its turn: nothing ran
			continue
		}
		t := newTx(g.store, btx.q, deferred)
		t.locks = locks
		ok, err := g.runOne(ctx, btx.q, t, r, savepoints)
		if err != nil {
			btx.rollback()
			failAll(batch, err)
			return batchDone, nil
		}
		if !ok {
			btx.rollback()
			if deferred.errOrNil() != nil && r.panicked == nil {
				// It failed on a flush of the batch's rows: its answer is
				// not its own (others' rows, or its own in a multi-row
				// statement). It runs again, rows written as they come.
				r.err = nil
				return batchRerun, nil
			}
			switch {
			case r.err != nil && retryable(r.err):
				return batchRetry, r.err
			case len(batch) > 1:
				return batchRerun, nil
			}
			return batchDone, nil // alone in its batch: its answer is final
		}
		woke = woke || (r.pending && t.woke)
		hooked = hooked || (r.pending && t.hooked)
	}
	return g.commitTxs(ctx, btx, deferred, batch, woke, hooked)
}

// commitTxs commits the batch's transaction and wakes what its writes
// made due: the delivery workers (woke) and the webhook worker (hooked).
func (g *groupCommit) commitTxs(ctx context.Context, btx batchTx, deferred *deferredRows, batch []*txReq, woke, hooked bool) (batchEnd, error) {
	flushErr, err := btx.commit(ctx, deferred)
	if flushErr != nil {
		btx.rollback()
		if retryable(flushErr) {
			return batchRetry, flushErr
		}
		return batchRerun, flushErr // in savepoints, the guilty one fails alone
	}
	if err != nil {
		if retryable(err) {
			return batchRetry, err
		}
		failAll(batch, fmt.Errorf("commit: %w", err))
		return batchDone, nil
	}
	if woke {
		g.store.woke()
	}
	if hooked && g.store.onWebhookDue != nil {
		g.store.onWebhookDue()
	}
	return batchDone, nil
}

// locksFor locks and reads the batch's keys in one call on PostgreSQL
// (prelock.go); nil elsewhere, and for a batch of one.
func (g *groupCommit) locksFor(ctx context.Context, q querier, batch []*txReq) (batchLocks, error) {
	if g.store.PG == nil || len(batch) < 2 {
		return nil, nil
	}
	locks, err := prelock(ctx, q, batch)
	g.prelocked.Add(int64(len(locks)))
	return locks, err
}

// runOne runs one request's fn on t. ok: the batch goes on (fn succeeded,
// or failed and was undone alone in its savepoint); otherwise the batch's
// transaction must be rolled back. An error fails the whole batch.
func (g *groupCommit) runOne(ctx context.Context, q querier, t *Tx, r *txReq, savepoints bool) (ok bool, err error) {
	if savepoints {
		if _, err := q.exec(ctx, "SAVEPOINT gc"); err != nil {
			return false, fmt.Errorf("savepoint: %w", err)
		}
	}
	r.err, r.panicked = call(r.fn, t)
	if r.err == nil && r.panicked == nil {
		r.pending = true
		if savepoints {
			if _, err := q.exec(ctx, "RELEASE gc"); err != nil {
				return false, fmt.Errorf("release savepoint: %w", err)
			}
		}
		return true, nil
	}
	if !savepoints || (r.err != nil && retryable(r.err)) {
		return false, nil
	}
	// Undo this one's part only. If even that fails the transaction is not
	// trustworthy any more: nothing of the batch commits.
	if err := rollbackTo(ctx, q); err != nil {
		return false, fmt.Errorf("roll back to savepoint: %w", err)
	}
	return true, nil
}

// failAll gives every request that ran in the batch the batch's error:
// none of its work committed, and even an answer that wrote nothing (a
// replay found in the batch) may rest on another request's work that did
// not commit either. A panic stays a panic.
func failAll(batch []*txReq, err error) {
	for _, r := range batch {
		if r.panicked == nil && !errors.Is(r.err, context.Canceled) && !errors.Is(r.err, context.DeadlineExceeded) {
			r.pending, r.err = false, err
		}
	}
}

// retryable reports a PostgreSQL deadlock (40P01) or serialization failure
// (40001): the transaction was not wrong, only unlucky, and the same work
// can run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

func call(fn func(core.Tx) error, t core.Tx) (err error, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	return fn(t), nil
}

func rollbackTo(ctx context.Context, q querier) error {
	if _, err := q.exec(ctx, "ROLLBACK TO SAVEPOINT gc"); err != nil {
		return err
	}
	_, err := q.exec(ctx, "RELEASE SAVEPOINT gc")
	return err
}
