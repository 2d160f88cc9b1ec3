package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Dialect names the database behind a Store.
type Dialect string

const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// The store's SQL is written once, with ? placeholders and standard SQL
// that both databases accept; querier runs it on database/sql (SQLite) or
// on pgx (PostgreSQL, where ? becomes $n).
type querier interface {
	exec(ctx context.Context, q string, args ...any) (rowsAffected int64, err error)
	queryRow(ctx context.Context, q string, args ...any) row
	query(ctx context.Context, q string, args ...any) (rows, error)
}

type row interface{ Scan(dest ...any) error }

type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// sqlQuerier runs on a *sql.DB or *sql.Tx. With stmts set, statements
// are prepared once and reused: database/sql would otherwise have SQLite
// parse and plan every statement on every call, which profiling showed to
// be a third of the accept path's CPU.
type sqlQuerier struct {
	db interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	}
	stmts *stmtCache
	tx    *sql.Tx // set when db is this transaction
	// detached statements ignore their context's cancellation (see
	// groupCommit); they still see its values.
	detached bool
}

func (q sqlQuerier) ctx(ctx context.Context) context.Context {
	if q.detached {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

func (q sqlQuerier) stmt(ctx context.Context, s string) (*sql.Stmt, bool) {
	if q.stmts == nil {
		return nil, false
	}
	if q.tx != nil {
		// Inside a transaction the pool's only connection is taken:
		// preparing now would wait for it forever. Use a statement prepared
		// earlier (on that same connection, so the transaction reuses it
		// as is), or run this one plain and prepare it after the commit.
		st, ok := q.stmts.lookup(s)
		if !ok {
			return nil, false
		}
		return q.tx.StmtContext(ctx, st), true
	}
	st, err := q.stmts.get(ctx, s)
	if err != nil {
		return nil, false // the plain path reports the error
	}
	return st, true
}

func (q sqlQuerier) exec(ctx context.Context, s string, args ...any) (int64, error) {
	ctx = q.ctx(ctx)
	var (
		res sql.Result
		err error
	)
	if st, ok := q.stmt(ctx, s); ok {
		res, err = st.ExecContext(ctx, args...)
	} else {
		res, err = q.db.ExecContext(ctx, s, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q sqlQuerier) queryRow(ctx context.Context, s string, args ...any) row {
	ctx = q.ctx(ctx)
	if st, ok := q.stmt(ctx, s); ok {
		return st.QueryRowContext(ctx, args...)
	}
	return q.db.QueryRowContext(ctx, s, args...)
}

func (q sqlQuerier) query(ctx context.Context, s string, args ...any) (rows, error) {
	ctx = q.ctx(ctx)
	if st, ok := q.stmt(ctx, s); ok {
		return st.QueryContext(ctx, args...)
	}
	return q.db.QueryContext(ctx, s, args...)
}

// stmtCache holds one prepared statement per SQL text for a pool. The set
// of texts is the store's own (a few dozen), so it needs no bound.
type stmtCache struct {
	db     *sql.DB
	mu     sync.Mutex
	m      map[string]*sql.Stmt
	wanted map[string]bool // used inside a transaction before it was prepared
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: map[string]*sql.Stmt{}, wanted: map[string]bool{}}
}

// lookup returns a prepared statement without preparing one; a miss is
// remembered for prepareWanted.
func (c *stmtCache) lookup(q string) (*sql.Stmt, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.m[q]
	if !ok {
		c.wanted[q] = true
	}
	return st, ok
}

// prepareWanted prepares the statements transactions missed. It runs while
// no transaction holds the connection (after a commit or rollback).
func (c *stmtCache) prepareWanted(ctx context.Context) {
	c.mu.Lock()
	var qs []string
	for q := range c.wanted {
		qs = append(qs, q)
	}
	c.wanted = map[string]bool{}
	c.mu.Unlock()
	for _, q := range qs {
		_, _ = c.get(ctx, q) // a statement that fails to prepare just stays plain
	}
}

func (c *stmtCache) get(ctx context.Context, q string) (*sql.Stmt, error) {
	c.mu.Lock()
	st, ok := c.m[q]
	c.mu.Unlock()
	if ok {
		return st, nil
	}
	// Not under the lock: preparing may wait for the connection, and the
	// transaction holding it needs the lock for lookup.
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.m[q]; ok {
		st.Close() // prepared twice at once: keep the first
		return prev, nil
	}
	c.m[q] = st
	return st, nil
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = map[string]*sql.Stmt{}
}

// pgxQuerier runs on a *pgxpool.Pool or a pgx.Tx.
type pgxQuerier struct {
	db interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	}
	rebind *rebinder
}

func (q pgxQuerier) exec(ctx context.Context, s string, args ...any) (int64, error) {
	tag, err := q.db.Exec(ctx, q.rebind.do(s), args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (q pgxQuerier) queryRow(ctx context.Context, s string, args ...any) row {
	return pgxRow{q.db.QueryRow(ctx, q.rebind.do(s), args...)}
}

func (q pgxQuerier) query(ctx context.Context, s string, args ...any) (rows, error) {
	r, err := q.db.Query(ctx, q.rebind.do(s), args...)
	if err != nil {
		return nil, err
	}
	return pgxRows{r}, nil
}

// pgxRow reports a missing row as sql.ErrNoRows, as the scanners expect.
type pgxRow struct{ r pgx.Row }

func (r pgxRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return sql.ErrNoRows
	}
	return err
}

type pgxRows struct{ pgx.Rows }

func (r pgxRows) Close() error {
	r.Rows.Close()
	return r.Rows.Err()
}

// rebinder turns ? placeholders into $1, $2, … once per statement text.
// The store's SQL has no ? inside string literals.
type rebinder struct{ cache sync.Map }

func (r *rebinder) do(q string) string {
	if v, ok := r.cache.Load(q); ok {
		return v.(string)
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	out := b.String()
	r.cache.Store(q, out)
	return out
}

var passwordInURL = regexp.MustCompile(`(://[^:/@\s]*):[^@/\s]*@`)

// redactPassword hides a URL's password in text meant for logs and errors.
func redactPassword(s string) string {
	return passwordInURL.ReplaceAllString(s, "${1}:xxxxx@")
}
