package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sendonce/sendonce/internal/sqldialect"
)

// Dialect names the database behind a Store (shared with idempotency and
// outbox).
type Dialect = sqldialect.Dialect

const (
	SQLite   = sqldialect.SQLite
	Postgres = sqldialect.Postgres
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

// sqlQuerier runs on a *sql.DB or *sql.Tx. SQLite's connections keep
// their prepared statements themselves (stmtConnector).
type sqlQuerier struct {
	db interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	}
	// detached statements ignore their context's cancellation (see
	// groupCommit); they still see its values.
	detached bool
}

func (q sqlQuerier) ctx(ctx context.Context) context.Context { return detach(ctx, q.detached) }

// detach is ctx without its cancellation when the querier is detached.
func detach(ctx context.Context, detached bool) context.Context {
	if detached {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

func (q sqlQuerier) exec(ctx context.Context, s string, args ...any) (int64, error) {
	res, err := q.db.ExecContext(q.ctx(ctx), s, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q sqlQuerier) queryRow(ctx context.Context, s string, args ...any) row {
	return q.db.QueryRowContext(q.ctx(ctx), s, args...)
}

func (q sqlQuerier) query(ctx context.Context, s string, args ...any) (rows, error) {
	return q.db.QueryContext(q.ctx(ctx), s, args...)
}

// pgxQuerier runs on a *pgxpool.Pool, a pgx.Tx, or a batch's connection
// once its transaction has begun (pgBatchTx).
type pgxQuerier struct {
	db interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	}
	rebind *sqldialect.Rebinder
	// detached statements ignore their context's cancellation (see
	// groupCommit): a batch's transaction is shared.
	detached bool
}

func (q pgxQuerier) ctx(ctx context.Context) context.Context { return detach(ctx, q.detached) }

// Every error of pgxQuerier that says the server is out of reach is
// marked core.Unavailable (pgUnavailable).
func (q pgxQuerier) exec(ctx context.Context, s string, args ...any) (int64, error) {
	tag, err := q.db.Exec(q.ctx(ctx), q.rebind.Rebind(s), args...)
	if err != nil {
		return 0, pgUnavailable(err)
	}
	return tag.RowsAffected(), nil
}

func (q pgxQuerier) queryRow(ctx context.Context, s string, args ...any) row {
	return pgxRow{q.db.QueryRow(q.ctx(ctx), q.rebind.Rebind(s), args...)}
}

func (q pgxQuerier) query(ctx context.Context, s string, args ...any) (rows, error) {
	r, err := q.db.Query(q.ctx(ctx), q.rebind.Rebind(s), args...)
	if err != nil {
		return nil, pgUnavailable(err)
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
	return pgUnavailable(err)
}

type pgxRows struct{ pgx.Rows }

func (r pgxRows) Err() error { return pgUnavailable(r.Rows.Err()) }

func (r pgxRows) Close() error {
	r.Rows.Close()
	return pgUnavailable(r.Rows.Err())
}

var passwordInURL = regexp.MustCompile(`(://[^:/@\s]*):[^@/\s]*@`)

// redactPassword hides a URL's password in text meant for logs and errors.
func redactPassword(s string) string {
	return passwordInURL.ReplaceAllString(s, "${1}:xxxxx@")
}

// list runs a query and appends every row, read by scan, to out: callers
// pass nil or an empty slice, and an empty answer stays as they passed it
// (an API list answers [], never null).
func list[T any](ctx context.Context, q querier, what string, scan func(rowScanner) (T, error), out []T, query string, args ...any) ([]T, error) {
	rows, err := q.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return collect(rows, what, scan, out)
}

// listPage is list for one page of at most limit rows: query ends in
// LIMIT ?, which listPage fills with one more row than the page holds, so
// that more says whether another page follows.
func listPage[T any](ctx context.Context, q querier, what string, scan func(rowScanner) (T, error), out []T, limit int, query string, args ...any) (page []T, more bool, err error) {
	page, err = list(ctx, q, what, scan, out, query, append(args, limit+1)...)
	if err != nil {
		return nil, false, err
	}
	if len(page) > limit {
		return page[:limit], true, nil
	}
	return page, false, nil
}

// queryCount runs a query of one integer (a count, an EXISTS) on q;
// what names it in the error.
func queryCount(ctx context.Context, q querier, what, query string, args ...any) (int, error) {
	var n int
	if err := q.queryRow(ctx, query, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return n, nil
}

// collect appends every row, read with scan, to out and closes rows;
// what names the read in the error of a read that broke off.
func collect[T any](rows rows, what string, scan func(rowScanner) (T, error), out []T) ([]T, error) {
	defer rows.Close()
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// stringSet runs a query of one text column and returns its values as a
// set; what names the read in its errors.
func stringSet(ctx context.Context, q querier, what, query string, args ...any) (map[string]bool, error) {
	vs, err := list(ctx, q, what, scanString, nil, query, args...)
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(vs))
	for _, v := range vs {
		set[v] = true
	}
	return set, nil
}

// scanString reads a row of one text column.
func scanString(r rowScanner) (string, error) {
	var v string
	err := r.Scan(&v)
	return v, err
}
