package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite"
)

// ParseDSN turns the --db value "sqlite:PATH" into the file path.
func ParseDSN(dsn string) (string, error) {
	path, ok := strings.CutPrefix(dsn, "sqlite:")
	if !ok {
		return "", fmt.Errorf("database %q: want sqlite:PATH", dsn)
	}
	path = strings.TrimPrefix(path, "//")
	if path == "" {
		return "", fmt.Errorf("database %q: empty path", dsn)
	}
	return path, nil
}

// Open opens (creating when needed) the SQLite database at path and applies
// the schema migrations.
func Open(ctx context.Context, path string) (*Store, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create database directory: %w", err)
		}
	}
	// synchronous(FULL): an acknowledged accept survives power loss, not
	// only a process crash. _txlock=immediate takes the write lock at BEGIN,
	// so a transaction never fails halfway on a lock upgrade.
	common := "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)&_pragma=temp_store(MEMORY)"
	u := "file:" + (&url.URL{Path: path}).EscapedPath()
	// The writer's page cache holds the pages of the indexes that every
	// accept touches at random (the idempotency keys): at SQLite's default
	// 2 MB each insert read them from the file again.
	w := sql.OpenDB(stmtConnector{d: &sqlite.Driver{}, dsn: u + "?" + common + "&_txlock=immediate&_pragma=cache_size(-" + strconv.Itoa(writerCacheKiB) + ")&_pragma=wal_autocheckpoint(" + strconv.Itoa(walCheckpointPages) + ")"})
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	r := sql.OpenDB(stmtConnector{d: &sqlite.Driver{}, dsn: u + "?" + common + "&_pragma=query_only(1)"})
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	s := &Store{dialect: SQLite, W: w, rdb: r, w: sqlQuerier{db: w}, r: sqlQuerier{db: r}}
	if err := s.migrateSQLite(ctx); err != nil {
		s.Close()
		return nil, err
	}
	s.gc = newGroupCommit(s, DefaultMaxBatch, 1, deferRowsSQLite, s.beginSQLite)
	return s, nil
}

// writerCacheKiB is the SQLite writer's page cache. 16 MiB since the
// idempotency records moved out of the key's B-tree (migration 0016): the
// random working set is the narrow key indexes now, and 32 MiB bought no
// accepts (A/B 4,796 / 4,768 ok/s at 32, 4,896 / 4,834 at 16) while it
// took the process's peak RSS past 150 MB (sendonce-bench --mode all:
// 152–162 MiB at 32, 120–131 MiB at 16; docs/performance-journal.md).
const writerCacheKiB = 16 << 10

// walCheckpointPages is how large the WAL grows (in 4 KiB pages) before the
// writer copies it back into the database, inside a commit. SQLite's
// default, kept on purpose: 10,000 pages gave +15% new-key accepts (fewer
// copies of the hot index pages) but doubled p99 (57–64 ms against 27–29
// ms, A/B, docs/performance-journal.md), since each checkpoint then stalls
// one commit for longer.
const walCheckpointPages = 1000

func (s *Store) migrateSQLite(ctx context.Context) error {
	files, err := migrationsOf(SQLite)
	if err != nil {
		return err
	}
	// Foreign keys are off while migrations run, as SQLite's procedure for
	// rebuilding a table asks (DROP TABLE would otherwise delete the
	// rows that point at it), and checked before the commit. The pragma
	// has no effect inside a transaction, so it is set on one connection
	// held for the whole run.
	conn, err := s.W.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migration connection: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA foreign_keys = OFF"); err != nil {
		return fmt.Errorf("migration: foreign keys off: %w", err)
	}
	err = applySQLiteMigrations(ctx, conn, files)
	if _, onErr := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA foreign_keys = ON"); onErr != nil {
		// Never back into the pool without its foreign keys: a bad
		// connection is closed, and the pool opens a new one (its DSN
		// turns them on).
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		return errors.Join(err, fmt.Errorf("migration: foreign keys on: %w", onErr))
	}
	return err
}

// applySQLiteMigrations applies the migrations not yet recorded, in one
// transaction on conn, and — when it applied any — checks the foreign keys
// before the commit (a full pass over every table that has one, so only
// then).
func applySQLiteMigrations(ctx context.Context, conn *sql.Conn, files []migrationFile) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS sendonce_migrations (
		version TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create migrations table: %w", err)
	}
	applied := 0
	for _, file := range files {
		version := file.version
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sendonce_migrations WHERE version = ?", version).Scan(&n); err != nil {
			return fmt.Errorf("check migration %s: %w", version, err)
		}
		if n > 0 {
			continue
		}
		body, err := migrationFiles.ReadFile(file.path)
		if err != nil {
			return fmt.Errorf("read migration %s: %w", version, err)
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			return fmt.Errorf("apply migration %s: %w", version, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO sendonce_migrations (version, applied_at) VALUES (?, ?)", version, micros(time.Now())); err != nil {
			return fmt.Errorf("record migration %s: %w", version, err)
		}
		applied++
	}
	if applied > 0 {
		if err := foreignKeysHold(ctx, tx); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit migrations: %w", err)
	}
	return nil
}

// foreignKeysHold reports, before migrations commit, a row whose foreign
// key names nothing (PRAGMA foreign_key_check).
func foreignKeysHold(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, "PRAGMA foreign_key_check")
	if err != nil {
		return fmt.Errorf("check foreign keys: %w", err)
	}
	defer rows.Close()
	if rows.Next() {
		var table string
		var rowid sql.NullInt64
		var parent string
		var fkid int
		if err := rows.Scan(&table, &rowid, &parent, &fkid); err != nil {
			return fmt.Errorf("check foreign keys: %w", err)
		}
		return fmt.Errorf("migrations leave a row of %s pointing at no row of %s", table, parent)
	}
	return rows.Err()
}
