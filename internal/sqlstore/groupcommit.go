package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/sendonce/sendonce/internal/core"
)

// ErrClosed is returned by InTx once the store is closing.
var ErrClosed = errors.New("store is closed")

// DefaultMaxBatch bounds how many write transactions one SQLite commit
// carries. Larger batches stop paying off once the fsync is shared by a few
// dozen; the bound keeps one batch's latency small.
const DefaultMaxBatch = 64

// groupCommit runs the write transactions of many goroutines in shared
// SQLite transactions: one fsync for a batch instead of one per request.
//
// Batches form naturally, without an added delay: while one batch commits
// (the fsync), the transactions that arrive wait and make up the next one.
// Each transaction runs inside its own SAVEPOINT, so one that fails rolls
// back alone; each caller returns only after the batch that holds its work
// has committed, so durability is exactly that of a transaction of its own
// (synchronous=FULL).
type groupCommit struct {
	store    *Store
	db       *sql.DB
	reqs     chan *txReq // unbuffered: a request received is always answered
	maxBatch int
	stop     chan struct{}
	stopOnce sync.Once
	stopped  chan struct{}
	batches  func(n int) // observes batch sizes (metrics, tests); may be nil
}

// ObserveGroupCommits has fn called with the number of transactions of
// every SQLite commit (for metrics). Call it once, before the store is
// used; it does nothing on PostgreSQL.
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

func newGroupCommit(s *Store, maxBatch int) *groupCommit {
	if maxBatch < 1 {
		maxBatch = DefaultMaxBatch
	}
	g := &groupCommit{
		store: s, db: s.W, reqs: make(chan *txReq), maxBatch: maxBatch,
		stop: make(chan struct{}), stopped: make(chan struct{}),
	}
	go g.run()
	return g
}

// do runs fn in the next batch and returns once that batch has committed
// or fn's part of it has rolled back. A panic in fn is raised again here,
// in the caller's goroutine.
func (g *groupCommit) do(ctx context.Context, fn func(core.Tx) error) error {
	r := &txReq{ctx: ctx, fn: fn, done: make(chan struct{})}
	select {
	case g.reqs <- r:
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
	<-g.stopped
}

func (g *groupCommit) run() {
	defer close(g.stopped)
	batch := make([]*txReq, 0, g.maxBatch)
	for {
		select {
		case r := <-g.reqs:
			batch = append(batch[:0], r)
		case <-g.stop:
			return
		}
	fill:
		for len(batch) < g.maxBatch {
			select {
			case r := <-g.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		g.runBatch(batch)
		clear(batch) // let the finished requests go
	}
}

func (g *groupCommit) runBatch(batch []*txReq) {
	defer func() {
		for _, r := range batch {
			close(r.done)
		}
	}()
	if g.batches != nil {
		g.batches(len(batch))
	}
	// Optimistic first: no savepoints, which cost two statements and a
	// copy of every page a transaction touches. When one transaction
	// fails, all of it rolls back and the others run again, each in a
	// savepoint of its own; those that failed keep their answer.
	if g.runTxs(batch, false) {
		for _, r := range batch {
			r.pending = false
		}
		g.runTxs(batch, true)
	}
}

// runTxs runs the batch's transactions (those that have no answer yet) in one
// SQLite transaction and commits it. With savepoints, a transaction that
// fails is undone alone; without, the first failure rolls everything back
// and runTxs reports rerun: the others' work may have read the failed one's
// writes, so they all run again.
func (g *groupCommit) runTxs(batch []*txReq, savepoints bool) (rerun bool) {
	// Not a caller's context: one caller going away must not cancel the
	// transaction the others share.
	ctx := context.Background()
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		failAll(batch, fmt.Errorf("begin: %w", err))
		return false
	}
	// detached: statements ignore their caller's cancellation. Interrupting
	// a statement makes SQLite roll back the whole transaction — every
	// other caller's work in it too.
	q := sqlQuerier{db: tx, detached: true}
	woke := false
	savepoints = savepoints && len(batch) > 1
	for _, r := range batch {
		if r.err != nil || r.panicked != nil {
			continue // answered by an earlier run
		}
		if err := r.ctx.Err(); err != nil {
			r.err = err // its caller left before its turn: nothing ran
			continue
		}
		if savepoints {
			if _, err := q.exec(ctx, "SAVEPOINT gc"); err != nil {
				_ = tx.Rollback()
				failAll(batch, fmt.Errorf("savepoint: %w", err))
				return false
			}
		}
		t := &Tx{q: q, s: g.store}
		r.err, r.panicked = call(r.fn, t)
		if r.err == nil && r.panicked == nil {
			r.pending = true
			woke = woke || t.woke
			if savepoints {
				if _, err := q.exec(ctx, "RELEASE gc"); err != nil {
					_ = tx.Rollback()
					failAll(batch, fmt.Errorf("release savepoint: %w", err))
					return false
				}
			}
			continue
		}
		if !savepoints {
			_ = tx.Rollback()
			return len(batch) > 1
		}
		// Undo this one's part only. If even that fails the transaction is
		// not trustworthy any more: nothing of the batch commits.
		if err := rollbackTo(ctx, q); err != nil {
			_ = tx.Rollback()
			failAll(batch, fmt.Errorf("roll back to savepoint: %w", err))
			return false
		}
	}
	if err := tx.Commit(); err != nil {
		failAll(batch, fmt.Errorf("commit: %w", err))
		return false
	}
	if woke {
		g.store.woke()
	}
	return false
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

func call(fn func(core.Tx) error, t core.Tx) (err error, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	return fn(t), nil
}

func rollbackTo(ctx context.Context, q sqlQuerier) error {
	if _, err := q.exec(ctx, "ROLLBACK TO gc"); err != nil {
		return err
	}
	_, err := q.exec(ctx, "RELEASE gc")
	return err
}
