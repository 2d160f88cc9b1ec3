package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Migration is one schema migration and whether a database has it.
type Migration struct {
	// Name is the migration's file name (0001_init.sql).
	Name string
	// Applied: the database records it.
	Applied bool
	// AppliedAt is when it was applied; zero when pending.
	AppliedAt time.Time
	// Unknown: the database records it but this binary does not know it
	// (a newer version applied it).
	Unknown bool
}

// Pending counts the migrations not applied.
func Pending(ms []Migration) int {
	n := 0
	for _, m := range ms {
		if !m.Applied {
			n++
		}
	}
	return n
}

// SQLiteMigrations lists the store's SQLite migrations, each applied or
// pending in db, and those db has that this binary does not know. db nil
// stands for a database not created yet: all pending. It only reads.
func SQLiteMigrations(ctx context.Context, db *sql.DB) ([]Migration, error) {
	names, err := migrationVersions(SQLite)
	if err != nil {
		return nil, err
	}
	if db == nil {
		return mergeMigrations(names, nil), nil
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sendonce_migrations'").Scan(&n); err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	if n == 0 {
		return mergeMigrations(names, nil), nil
	}
	rows, err := db.QueryContext(ctx, "SELECT version, applied_at FROM sendonce_migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	defer rows.Close()
	applied := map[string]time.Time{}
	for rows.Next() {
		var v string
		var at int64
		if err := rows.Scan(&v, &at); err != nil {
			return nil, fmt.Errorf("read migrations: %w", err)
		}
		applied[v] = fromMicros(at)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	return mergeMigrations(names, applied), nil
}

// PostgresMigrations is SQLiteMigrations on the PostgreSQL database of
// pool, which should be read-only (OpenPostgresReadOnly).
func PostgresMigrations(ctx context.Context, pool *pgxpool.Pool) ([]Migration, error) {
	names, err := migrationVersions(Postgres)
	if err != nil {
		return nil, err
	}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('sendonce_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return nil, fmt.Errorf("read migrations: %w", redactedErr(err))
	}
	if !exists {
		return mergeMigrations(names, nil), nil
	}
	rows, err := pool.Query(ctx, "SELECT version, applied_at FROM sendonce_migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", redactedErr(err))
	}
	applied := map[string]time.Time{}
	var v string
	var at int64
	if _, err := pgx.ForEachRow(rows, []any{&v, &at}, func() error {
		applied[v] = fromMicros(at)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read migrations: %w", redactedErr(err))
	}
	return mergeMigrations(names, applied), nil
}

// OpenPostgresReadOnly connects to url with one connection whose every
// transaction is read-only, for commands that must not change the
// database. It migrates nothing.
func OpenPostgresReadOnly(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres url: %w", redactedErr(err))
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect postgres: %w", redactedErr(err))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect postgres: %w", redactedErr(err))
	}
	return pool, nil
}

// OpenSQLiteReadOnly opens the SQLite database at path read-only: it is
// not created when absent (an error that is fs.ErrNotExist), and no
// statement on it can write. It migrates nothing.
func OpenSQLiteReadOnly(path string) (*sql.DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	return openSQLiteReadOnly(path), nil
}

// mergeMigrations lists every known name, applied or not, then the
// applied ones the binary does not know, in name order (the order
// migrations apply in).
func mergeMigrations(known []string, applied map[string]time.Time) []Migration {
	out := make([]Migration, 0, len(known))
	for _, name := range known {
		at, ok := applied[name]
		out = append(out, Migration{Name: name, Applied: ok, AppliedAt: at})
	}
	for name, at := range applied {
		if !slices.Contains(known, name) {
			out = append(out, Migration{Name: name, Applied: true, AppliedAt: at, Unknown: true})
		}
	}
	slices.SortFunc(out, func(a, b Migration) int { return cmp.Compare(a.Name, b.Name) })
	return out
}
