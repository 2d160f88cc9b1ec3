package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

//go:embed migrations/sqlite/*.sql
var sqliteMigrations embed.FS

// Enqueuer inserts a delivery job inside tx (a *sql.Tx on SQLite, a pgx.Tx
// on PostgreSQL). The queue provides it; the store calls it from
// Tx.EnqueueDelivery so that a send and its job commit together.
type Enqueuer func(ctx context.Context, tx any, sendID string) error

// Store is the SQLite implementation of core.Store.
type Store struct {
	// W is the single-connection pool every write goes through. River uses
	// it too.
	W       *sql.DB
	r       *sql.DB
	enqueue Enqueuer
}

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
	common := "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)"
	u := "file:" + (&url.URL{Path: path}).EscapedPath()
	w, err := sql.Open("sqlite", u+"?"+common+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	r, err := sql.Open("sqlite", u+"?"+common+"&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	s := &Store{W: w, r: r}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// SetEnqueuer wires the queue in. It must be called before the first
// EnqueueDelivery; wiring happens once, in cmd.
func (s *Store) SetEnqueuer(e Enqueuer) { s.enqueue = e }

// Close closes both pools.
func (s *Store) Close() error {
	return errors.Join(s.r.Close(), s.W.Close())
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.r.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("ping sqlite: %w", err)
	}
	return nil
}

func (s *Store) migrate(ctx context.Context) error {
	names, err := fs.Glob(sqliteMigrations, "migrations/sqlite/*.sql")
	if err != nil {
		return fmt.Errorf("list migrations: %w", err)
	}
	sort.Strings(names)
	tx, err := s.W.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS sendonce_migrations (
		version TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("create migrations table: %w", err)
	}
	for _, name := range names {
		version := filepath.Base(name)
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sendonce_migrations WHERE version = ?", version).Scan(&n); err != nil {
			return fmt.Errorf("check migration %s: %w", version, err)
		}
		if n > 0 {
			continue
		}
		body, err := sqliteMigrations.ReadFile(name)
		if err != nil {
			return fmt.Errorf("read migration %s: %w", version, err)
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			return fmt.Errorf("apply migration %s: %w", version, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO sendonce_migrations (version, applied_at) VALUES (?, ?)", version, micros(time.Now())); err != nil {
			return fmt.Errorf("record migration %s: %w", version, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit migrations: %w", err)
	}
	return nil
}

// InTx runs fn in one write transaction.
func (s *Store) InTx(ctx context.Context, fn func(tx core.Tx) error) error {
	sqlTx, err := s.W.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	t := &Tx{tx: sqlTx, s: s}
	defer func() {
		// A panicking fn must not keep the only write connection.
		if p := recover(); p != nil {
			_ = sqlTx.Rollback()
			panic(p)
		}
	}()
	if err := fn(t); err != nil {
		_ = sqlTx.Rollback()
		return err
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Tx is one write transaction.
type Tx struct {
	tx *sql.Tx
	s  *Store
}

// SQL exposes the transaction to code that must join it (the queue).
func (t *Tx) SQL() *sql.Tx { return t.tx }

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
