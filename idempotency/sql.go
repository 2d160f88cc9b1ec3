package idempotency

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/idempotency/idemtype"
	"github.com/sendonce/sendonce/internal/sqldialect"
)

// Dialect names the SQL database an SQLStore talks to. It is the dialect
// type sendonce's outbox package takes too.
type Dialect = sqldialect.Dialect

const (
	// SQLite, through modernc.org/sqlite (driver name "sqlite"). Open the
	// database with _txlock=immediate and a busy_timeout, e.g.
	// "file:app.db?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)",
	// so that a transaction takes the write lock at BEGIN instead of
	// failing on a lock upgrade halfway.
	SQLite = sqldialect.SQLite
	// PostgreSQL, through github.com/jackc/pgx/v5/stdlib (driver name
	// "pgx").
	PostgreSQL = sqldialect.Postgres
)

// SQLTable is the table Migrate creates and SQLStore uses.
const SQLTable = "idempotency_http_keys"

// Migrate creates SQLStore's table if it does not exist yet. It is safe to
// run at every start.
func Migrate(ctx context.Context, db *sql.DB, d Dialect) error {
	blob := "BLOB"
	switch d {
	case SQLite:
	case PostgreSQL:
		blob = "BYTEA"
	default:
		return fmt.Errorf("idempotency: unknown dialect %v", d)
	}
	// Times are unix microseconds, the same on both databases.
	_, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+SQLTable+` (
		tenant       TEXT NOT NULL,
		method       TEXT NOT NULL,
		route        TEXT NOT NULL,
		key          TEXT NOT NULL,
		fingerprint  TEXT NOT NULL,
		state        TEXT NOT NULL,
		token        TEXT NOT NULL,
		locked_until BIGINT NOT NULL,
		expires_at   BIGINT,
		status       INTEGER,
		content_type TEXT,
		body         `+blob+`,
		PRIMARY KEY (tenant, method, route, key))`)
	if err != nil {
		return fmt.Errorf("idempotency: create table %s: %w", SQLTable, err)
	}
	return nil
}

// SQLStore keeps records in a table of a SQLite or PostgreSQL database
// (create it with Migrate). It implements TxStore: with Options.RunInTx
// the handler does its own writes in the transaction that stores its
// response (see TxFromContext), so either both commit or neither does and
// a retry can never do the work twice.
//
// Call Purge now and then to drop expired records.
type SQLStore struct {
	db        *sql.DB
	dialect   Dialect
	forUpdate string
	q         map[string]string // query text, rebound for the dialect
}

// NewSQLStore returns a store on db, whose table Migrate created.
func NewSQLStore(db *sql.DB, d Dialect) *SQLStore {
	s := &SQLStore{db: db, dialect: d, q: make(map[string]string)}
	if d == PostgreSQL {
		s.forUpdate = " FOR UPDATE"
	}
	for name, q := range sqlQueries {
		if name == "select" {
			q += s.forUpdate
		}
		s.q[name] = d.Rebind(q)
	}
	s.q["select_plain"] = d.Rebind(sqlQueries["select"])
	return s
}

const pk = `tenant = ? AND method = ? AND route = ? AND key = ?`

var sqlQueries = map[string]string{
	"insert": `INSERT INTO ` + SQLTable + ` (tenant, method, route, key, fingerprint, state, token, locked_until)
		VALUES (?, ?, ?, ?, ?, 'in_flight', ?, ?) ON CONFLICT (tenant, method, route, key) DO NOTHING`,
	"select": `SELECT fingerprint, state, token, locked_until, expires_at, status, content_type, body
		FROM ` + SQLTable + ` WHERE ` + pk,
	"takeover": `UPDATE ` + SQLTable + ` SET fingerprint = ?, state = 'in_flight', token = ?, locked_until = ?,
		expires_at = NULL, status = NULL, content_type = NULL, body = NULL
		WHERE ` + pk + ` AND token = ?`,
	"complete": `UPDATE ` + SQLTable + ` SET state = 'completed', status = ?, content_type = ?, body = ?, expires_at = ?
		WHERE ` + pk + ` AND token = ? AND state = 'in_flight'`,
	"release": `DELETE FROM ` + SQLTable + ` WHERE ` + pk + ` AND token = ? AND state = 'in_flight'`,
	// Record.Expired, in SQL: sendonce's own idempotency_keys table is
	// purged by the same condition.
	"purge": `DELETE FROM ` + SQLTable + ` WHERE (state = 'completed' AND expires_at <= ?)
		OR (state <> 'completed' AND locked_until <= ?)`,
}

// sqlReserveAttempts bounds Reserve's retries; each one means another
// request changed the key between our insert and our update.
const sqlReserveAttempts = 5

type sqlQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *SQLStore) read(ctx context.Context, q sqlQuerier, query string, sc Scope) (*Record, error) {
	var (
		rec         Record
		locked      int64
		expires     sql.NullInt64
		status      sql.NullInt64
		contentType sql.NullString
		body        []byte
	)
	err := q.QueryRowContext(ctx, query, sc.Tenant, sc.Method, sc.Route, sc.Key).
		Scan(&rec.Fingerprint, &rec.State, &rec.Token, &locked, &expires, &status, &contentType, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("idempotency: read key: %w", err)
	}
	rec.LockedUntil = time.UnixMicro(locked)
	if expires.Valid {
		rec.ExpiresAt = time.UnixMicro(expires.Int64)
	}
	if rec.State == StateCompleted {
		if body == nil {
			body = []byte{}
		}
		rec.Response = &Response{Status: int(status.Int64), ContentType: contentType.String, Body: body}
	}
	return &rec, nil
}

// Reserve implements Store.
func (s *SQLStore) Reserve(ctx context.Context, sc Scope, fingerprint string, now time.Time, lease time.Duration) (Decision, error) {
	// Fast path without a write: a completed record does not change until
	// it expires, so a replay or a mismatch read outside a transaction is
	// final. A retry storm then costs one indexed read per request.
	rec, err := s.read(ctx, s.db, s.q["select_plain"], sc)
	if err != nil {
		return Decision{}, err
	}
	if rec != nil && rec.State == StateCompleted {
		switch o := Decide(rec, fingerprint, now); o {
		case Replay:
			return Decision{Outcome: o, Response: rec.Response}, nil
		case Mismatch:
			return Decision{Outcome: o}, nil
		}
	}
	for range sqlReserveAttempts {
		d, done, err := s.reserveOnce(ctx, sc, fingerprint, now, lease)
		if err != nil || done {
			return d, err
		}
	}
	return Decision{}, idemtype.ErrContended
}

// reserveOnce is one transaction of Reserve; done is false when another
// request changed the key in between and Reserve should try again.
func (s *SQLStore) reserveOnce(ctx context.Context, sc Scope, fingerprint string, now time.Time, lease time.Duration) (d Decision, done bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Decision{}, false, fmt.Errorf("idempotency: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	token := NewToken()
	locked := now.Add(lease).UnixMicro()
	// Insert first: the primary key decides between concurrent first
	// requests on either database (PostgreSQL makes the loser wait for the
	// winner's commit, then do nothing).
	res, err := tx.ExecContext(ctx, s.q["insert"], sc.Tenant, sc.Method, sc.Route, sc.Key, fingerprint, token, locked)
	if err != nil {
		return Decision{}, false, fmt.Errorf("idempotency: reserve: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		if err := tx.Commit(); err != nil {
			return Decision{}, false, fmt.Errorf("idempotency: commit reserve: %w", err)
		}
		return Decision{Outcome: Proceed, Token: token}, true, nil
	}
	rec, err := s.read(ctx, tx, s.q["select"], sc)
	if err != nil {
		return Decision{}, false, err
	}
	if rec == nil {
		return Decision{}, false, nil // released in between: insert again
	}
	switch o := Decide(rec, fingerprint, now); o {
	case Replay:
		return Decision{Outcome: o, Response: rec.Response}, true, nil
	case Proceed:
		// Expired, or its holder's lease ran out: take it over, but only
		// from the holder we read (the token check keeps this right even
		// where the read did not lock the row).
		res, err := tx.ExecContext(ctx, s.q["takeover"], fingerprint, token, locked,
			sc.Tenant, sc.Method, sc.Route, sc.Key, rec.Token)
		if err != nil {
			return Decision{}, false, fmt.Errorf("idempotency: take over: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return Decision{}, false, nil
		}
		if err := tx.Commit(); err != nil {
			return Decision{}, false, fmt.Errorf("idempotency: commit take over: %w", err)
		}
		return Decision{Outcome: Proceed, Token: token}, true, nil
	default:
		return Decision{Outcome: o}, true, nil
	}
}

type sqlExecer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func (s *SQLStore) complete(ctx context.Context, e sqlExecer, sc Scope, token string, resp Response, expires time.Time) error {
	body := resp.Body
	if body == nil {
		body = []byte{}
	}
	res, err := e.ExecContext(ctx, s.q["complete"], resp.Status, resp.ContentType, body, expires.UnixMicro(),
		sc.Tenant, sc.Method, sc.Route, sc.Key, token)
	if err != nil {
		return fmt.Errorf("idempotency: complete: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return ErrReservationLost
	}
	return nil
}

// Complete implements Store.
func (s *SQLStore) Complete(ctx context.Context, sc Scope, token string, resp Response, _, expires time.Time) error {
	return s.complete(ctx, s.db, sc, token, resp, expires)
}

// BeginTx implements TxStore.
func (s *SQLStore) BeginTx(ctx context.Context) (*sql.Tx, error) {
	return s.db.BeginTx(ctx, nil)
}

// CompleteTx implements TxStore.
func (s *SQLStore) CompleteTx(ctx context.Context, tx *sql.Tx, sc Scope, token string, resp Response, _, expires time.Time) error {
	return s.complete(ctx, tx, sc, token, resp, expires)
}

// Release implements Store.
func (s *SQLStore) Release(ctx context.Context, sc Scope, token string) error {
	if _, err := s.db.ExecContext(ctx, s.q["release"], sc.Tenant, sc.Method, sc.Route, sc.Key, token); err != nil {
		return fmt.Errorf("idempotency: release: %w", err)
	}
	return nil
}

// Purge deletes the records that are expired at now (Record.Expired: a
// completed one from its expiry on, a reservation from the end of its
// lease) and returns how many it deleted.
func (s *SQLStore) Purge(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.q["purge"], now.UnixMicro(), now.UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("idempotency: purge: %w", err)
	}
	return res.RowsAffected()
}
