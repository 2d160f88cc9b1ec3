package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"

	"github.com/sendonce/sendonce/internal/sqldialect"
)

// Dialect names the SQL the outbox speaks: the dialect type package
// idempotency takes too.
type Dialect = sqldialect.Dialect

// The supported dialects.
const (
	SQLite   = sqldialect.SQLite
	Postgres = sqldialect.Postgres
)

// DefaultTable is the task table's name unless Config.Table says otherwise.
const DefaultTable = "sendonce_outbox"

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

func checkDialect(d Dialect) error {
	if !d.Valid() {
		return fmt.Errorf("outbox: dialect %q: want %q or %q", d, SQLite, Postgres)
	}
	return nil
}

func checkTable(t string) error {
	if !tableName.MatchString(t) {
		return fmt.Errorf("outbox: table name %q: want letters, digits and _, at most 63", t)
	}
	return nil
}

// The schema. Times are Unix microseconds (UTC) in both dialects, so that
// one set of queries compares them the same way; 0 means "none".
const schema = `
CREATE TABLE IF NOT EXISTS {t} (
	id               TEXT PRIMARY KEY,
	idempotency_key  TEXT NOT NULL,
	payload          TEXT NOT NULL,
	state            TEXT NOT NULL,
	attempts         INTEGER NOT NULL DEFAULT 0,
	last_error       TEXT NOT NULL DEFAULT '',
	last_error_code  TEXT NOT NULL DEFAULT '',
	send_id          TEXT NOT NULL DEFAULT '',
	send_status      TEXT NOT NULL DEFAULT '',
	created_at       BIGINT NOT NULL,
	updated_at       BIGINT NOT NULL,
	next_attempt_at  BIGINT NOT NULL,
	first_attempt_at BIGINT NOT NULL DEFAULT 0,
	deadline         BIGINT NOT NULL,
	lease_until      BIGINT NOT NULL DEFAULT 0,
	lease_token      TEXT NOT NULL DEFAULT '',
	lease_owner      TEXT NOT NULL DEFAULT '',
	prev_state       TEXT NOT NULL DEFAULT '',
	CONSTRAINT {t}_state_check CHECK (state IN ('pending', 'sending', 'sent', 'rejected', 'needs_reconciliation'))
);
CREATE UNIQUE INDEX IF NOT EXISTS {t}_key ON {t} (idempotency_key);
CREATE INDEX IF NOT EXISTS {t}_due ON {t} (state, next_attempt_at);
CREATE INDEX IF NOT EXISTS {t}_lease ON {t} (state, lease_until);
`

// Migrate creates the task table (DefaultTable) and its indexes if they do
// not exist. Run it once at start-up, before Enqueue or Run.
func Migrate(ctx context.Context, db *sql.DB, dialect Dialect) error {
	return MigrateTable(ctx, db, dialect, DefaultTable)
}

// MigrateTable is Migrate for a table of another name (Config.Table).
func MigrateTable(ctx context.Context, db *sql.DB, dialect Dialect, table string) error {
	if err := checkDialect(dialect); err != nil {
		return err
	}
	if err := checkTable(table); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("outbox: migrate: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	for _, stmt := range strings.Split(strings.ReplaceAll(schema, "{t}", table), ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("outbox: migrate %s: %w", table, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("outbox: migrate: %w", err)
	}
	return nil
}

// sqlFor fills in the table name and, for PostgreSQL, turns ? placeholders
// into $1, $2, … (no query here has a ? inside a literal).
func sqlFor(d Dialect, table, q string) string {
	q = strings.ReplaceAll(q, "{t}", table)
	lock := ""
	if d == Postgres {
		lock = "FOR UPDATE SKIP LOCKED"
	}
	q = strings.ReplaceAll(q, "{lock}", lock)
	return d.Rebind(q)
}

// columns is the order scanRecord reads.
const columns = `id, idempotency_key, payload, state, attempts, last_error, last_error_code, send_id, send_status,
	created_at, updated_at, next_attempt_at, first_attempt_at, deadline, lease_until, lease_owner, prev_state`

const (
	qInsert = `INSERT INTO {t} (id, idempotency_key, payload, state, created_at, updated_at, next_attempt_at, deadline)
		VALUES (?, ?, ?, 'pending', ?, ?, ?, ?)
		ON CONFLICT (idempotency_key) DO NOTHING`
	qByKey = `SELECT ` + columns + ` FROM {t} WHERE idempotency_key = ?`
	qByID  = `SELECT ` + columns + ` FROM {t} WHERE id = ?`

	// qClaim takes the oldest due task: a pending one whose time has come,
	// or one whose worker's lease ran out (that worker is dead or hopelessly
	// slow; the outcome of its attempt is unknown). One statement, so
	// SQLite takes its write lock before it reads; PostgreSQL skips rows
	// another worker is claiming. prev_state keeps the state it left.
	qClaim = `UPDATE {t} SET
			prev_state = state,
			state = 'sending',
			attempts = attempts + 1,
			lease_until = ?, lease_token = ?, lease_owner = ?, updated_at = ?,
			first_attempt_at = CASE WHEN first_attempt_at = 0 THEN ? ELSE first_attempt_at END
		WHERE id = (
			SELECT id FROM {t}
			WHERE (state = 'pending' AND next_attempt_at <= ?) OR (state = 'sending' AND lease_until <= ?)
			ORDER BY next_attempt_at, created_at, id
			LIMIT 1 {lock})
		AND ((state = 'pending' AND next_attempt_at <= ?) OR (state = 'sending' AND lease_until <= ?))
		RETURNING ` + columns

	// qFinish records an attempt's outcome, only if this worker still
	// holds the lease: a worker whose lease ran out must not overwrite the
	// work of the one that took over.
	qFinish = `UPDATE {t} SET
			state = ?, last_error = ?, last_error_code = ?, send_id = ?, send_status = ?,
			next_attempt_at = ?, attempts = attempts + ?, updated_at = ?,
			prev_state = 'sending', lease_until = 0, lease_token = '', lease_owner = ''
		WHERE id = ? AND state = 'sending' AND lease_token = ?
		RETURNING ` + columns

	qReconcileSent = `UPDATE {t} SET state = 'sent', send_id = ?, send_status = ?, updated_at = ?, prev_state = state
		WHERE id = ? AND state = 'needs_reconciliation'
		RETURNING ` + columns
	qReconcileRetry = `UPDATE {t} SET state = 'pending', attempts = 0, next_attempt_at = ?, deadline = ?, updated_at = ?, prev_state = state
		WHERE id = ? AND state = 'needs_reconciliation'
		RETURNING ` + columns

	qList   = `SELECT ` + columns + ` FROM {t} WHERE state = ? ORDER BY created_at, id LIMIT ?`
	qCounts = `SELECT state, COUNT(*) FROM {t} GROUP BY state`
)
