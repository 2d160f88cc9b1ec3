package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqldialect"
)

// Store implements core.Store on SQLite or PostgreSQL. The SQL is shared;
// only opening, migrating and beginning transactions differ.
type Store struct {
	dialect Dialect
	w, r    querier
	// forUpdate locks the rows a write transaction reads (PostgreSQL);
	// SQLite's write transaction already excludes every other writer.
	forUpdate  string
	skipLocked string

	// W is SQLite's single-connection write pool (River uses it too).
	W   *sql.DB
	rdb *sql.DB
	// PG is the PostgreSQL pool for transactions (River uses it too);
	// PGRead serves the reads outside them.
	PG, PGRead *pgxpool.Pool
	rebind     *sqldialect.Rebinder

	// onDue is called after a commit that made a send due (see OnDue).
	onDue func()
	gc    *groupCommit // the batching writer

	// onWebhookDue is called after a commit that queued a webhook
	// delivery (see OnWebhookDue).
	onWebhookDue func()

	// fair is the tenant the last fair claim served first: the next one
	// starts after it (queue.go).
	fairMu sync.Mutex
	fair   string
}

func (s *Store) fairCursor() string {
	s.fairMu.Lock()
	defer s.fairMu.Unlock()
	return s.fair
}

func (s *Store) setFairCursor(tenant string) {
	s.fairMu.Lock()
	s.fair = tenant
	s.fairMu.Unlock()
}

// Dialect says which database the store runs on.
func (s *Store) Dialect() Dialect { return s.dialect }

// OnDue has fn called after every commit that wrote a queued send, so that
// this process's claimer looks at once instead of at its next poll. Call
// it once, before the store is used.
func (s *Store) OnDue(fn func()) { s.onDue = fn }

func (s *Store) woke() {
	if s.onDue != nil {
		s.onDue()
	}
}

// Close closes the pools.
func (s *Store) Close() error {
	if s.gc != nil {
		s.gc.close()
	}
	if s.PG != nil {
		s.PGRead.Close()
		s.PG.Close()
		return nil
	}
	return errors.Join(s.rdb.Close(), s.W.Close())
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.r.queryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("ping %s: %w", s.dialect, err)
	}
	return nil
}

// Tx is one write transaction: one caller's share of a batch (see
// groupCommit).
type Tx struct {
	// q runs statements, writing the batch's deferred rows first; direct
	// runs them as they are (for reads that the deferred rows cannot
	// change).
	q, direct querier
	// deferred holds the send rows and key records that the batch writes
	// as multi-row statements; nil when each is written at once.
	deferred *deferredRows
	s        *Store
	// woke: this transaction wrote a queued send (Store.OnDue).
	woke bool
	// hooked: this transaction queued a webhook delivery
	// (Store.OnWebhookDue).
	hooked bool
	// locks: the keys the batch locked and read before it ran (prelock.go).
	locks batchLocks
	// made: the sends this transaction inserted, in order; the first not
	// yet holding a record takes the next completed key (sendrecord.go).
	made []madeSend
	// prior: the keys DecideIdempotency found a record for; PutIdempotency
	// clears that record wherever it is before it writes the new one.
	prior map[idempotency.Scope]bool
}

func newTx(s *Store, q querier, d *deferredRows) *Tx {
	t := &Tx{q: q, direct: q, deferred: d, s: s}
	if d != nil {
		t.q = flushingQuerier{q: q, d: d}
	}
	return t
}

// InTx runs fn in one write transaction: commit when fn returns nil, roll
// back otherwise (and when fn panics).
//
// Concurrent calls share one database transaction and its commit (see
// groupCommit); each still returns only once its own work is durable. fn
// may then run more than once (when another call in its batch failed, or
// the batch met a deadlock on PostgreSQL): only its last run's writes
// commit, so fn must not act outside tx except by setting variables it
// owns.
func (s *Store) InTx(ctx context.Context, fn func(tx core.Tx) error) error {
	return s.gc.do(ctx, fn)
}

// beginSQLite begins a batch's transaction on the one write connection.
func (s *Store) beginSQLite(ctx context.Context) (batchTx, error) {
	tx, err := s.W.BeginTx(ctx, nil)
	if err != nil {
		return batchTx{}, err
	}
	// detached: statements ignore their caller's cancellation. Interrupting
	// a statement makes SQLite roll back the whole transaction — every
	// other caller's work in it too.
	q := sqlQuerier{db: tx, detached: true}
	return batchTx{
		q: q,
		commit: func(ctx context.Context, d *deferredRows) (error, error) {
			if err := d.flush(ctx, q); err != nil {
				return err, nil
			}
			return nil, tx.Commit()
		},
		rollback: func() { _ = tx.Rollback() },
	}, nil
}

// readTx runs fn on one read-only snapshot.
func (s *Store) readTx(ctx context.Context, fn func(q querier) error) error {
	if s.PG != nil {
		tx, err := s.PGRead.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead})
		if err != nil {
			return fmt.Errorf("begin read: %w", pgUnavailable(err))
		}
		defer tx.Rollback(context.WithoutCancel(ctx)) // read only: nothing to undo
		return fn(pgxQuerier{db: tx, rebind: s.rebind})
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback() // read only: nothing to undo
	return fn(sqlQuerier{db: tx})
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func fromNullMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

func nullMicros(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: micros(*t), Valid: true}
}

func nullString(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}

// Row is one result row of QueryRow.
type Row interface{ Scan(dest ...any) error }

// Exec runs one statement outside the store's own vocabulary (operator
// tooling, tests), with ? placeholders on either database.
func (s *Store) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return s.w.exec(ctx, query, args...)
}

// QueryRow is Exec's reading twin.
func (s *Store) QueryRow(ctx context.Context, query string, args ...any) Row {
	return s.r.queryRow(ctx, query, args...)
}

// execOne runs a statement whose WHERE names one row by its primary key
// (and maybe a condition on it), and answers core.ErrNotFound when it
// changed none; what names the change in an error.
func (t *Tx) execOne(ctx context.Context, what, query string, args ...any) error {
	n, err := t.q.exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return core.ErrNotFound
	}
	return nil
}

// rowErr is the error of reading the one row a key names: core.ErrNotFound
// when there is none, any other failure wrapped with what; nil for nil.
func rowErr(what string, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return core.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
