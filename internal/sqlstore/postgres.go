package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sendonce/sendonce/internal/sqldialect"
)

// DefaultMaxConns is a process's PostgreSQL connections when
// PostgresOptions.MaxConns (--db-max-conns) is zero.
const DefaultMaxConns = 20

// PostgresOptions tunes the connection pools and the start-up migration.
type PostgresOptions struct {
	// MaxConns bounds the connections of the process, shared out between
	// the two pools: a quarter (at least one) for reads outside
	// transactions, the rest (at least one) for transactions and the
	// queue. Defaults to 20.
	MaxConns int32
	// MinConns are kept open in the transaction pool. Defaults to 2.
	MinConns int32
	// WriteLanes is how many batches of write transactions (see InTx) run
	// at once, each on a connection of the transaction pool. Defaults to
	// DefaultWriteLanes.
	WriteLanes int
	// AlsoMigrate runs under the same migration lock after the store's own
	// schema (the queue's schema). Optional.
	AlsoMigrate func(ctx context.Context, pool *pgxpool.Pool) error
}

// DefaultWriteLanes is how many write batches a process runs at once on
// PostgreSQL: while one commits (waits for its WAL flush), the next runs
// its statements.
const DefaultWriteLanes = 2

// migrationLockID is the advisory lock every sendonce process takes while it
// migrates, so that processes starting together on an empty database do not
// race ("sendonce" in ASCII, truncated to 63 bits).
const migrationLockID = 0x73656e646f6e6365

// OpenPostgres connects to PostgreSQL and applies the schema migrations.
func OpenPostgres(ctx context.Context, url string, o PostgresOptions) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres url: %w", redactedErr(err))
	}
	cfg.MaxConnIdleTime = 5 * time.Minute
	// Two pools, as on SQLite (one writer, a pool of readers): code running
	// inside a write transaction reads through the store (a mailbox, a
	// template, a suppression) while it holds its connection. Were the
	// reads drawn from the same pool, as many transactions as connections
	// would each wait for a second one, and none would ever get it.
	total := int32(DefaultMaxConns)
	if o.MaxConns > 0 {
		total = o.MaxConns
	}
	rcfg := cfg.Copy()
	rcfg.MaxConns = max(1, total/4)
	rcfg.MinConns = 1
	cfg.MaxConns = max(1, total-rcfg.MaxConns)
	cfg.MinConns = min(2, cfg.MaxConns)
	if o.MinConns > 0 {
		cfg.MinConns = min(o.MinConns, cfg.MaxConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect postgres: %w", redactedErr(err))
	}
	rpool, err := pgxpool.NewWithConfig(ctx, rcfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect postgres: %w", redactedErr(err))
	}
	rb := &sqldialect.Rebinder{}
	s := &Store{
		dialect: Postgres, PG: pool, PGRead: rpool, rebind: rb,
		w: pgxQuerier{db: pool, rebind: rb}, r: pgxQuerier{db: rpool, rebind: rb},
		forUpdate: " FOR UPDATE", skipLocked: " FOR UPDATE SKIP LOCKED",
	}
	if err := s.migratePostgres(ctx, o.AlsoMigrate); err != nil {
		s.Close()
		return nil, err
	}
	lanes := DefaultWriteLanes
	if o.WriteLanes > 0 {
		lanes = o.WriteLanes
	}
	s.gc = newGroupCommit(s, DefaultMaxBatch, lanes, true, s.beginPostgres)
	return s, nil
}

// redactedErr keeps a connection error from quoting the URL's password.
func redactedErr(err error) error {
	return fmt.Errorf("%s", redactPassword(err.Error()))
}

func (s *Store) migratePostgres(ctx context.Context, also func(context.Context, *pgxpool.Pool) error) error {
	conn, err := s.PG.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(migrationLockID)); err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(migrationLockID)) //nolint:errcheck // the session ends with the connection anyway

	files, err := migrationsOf(Postgres)
	if err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS sendonce_migrations (
		version TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("create migrations table: %w", err)
	}
	for _, file := range files {
		version := file.version
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM sendonce_migrations WHERE version = $1", version).Scan(&n); err != nil {
			return fmt.Errorf("check migration %s: %w", version, err)
		}
		if n > 0 {
			continue
		}
		body, err := migrationFiles.ReadFile(file.path)
		if err != nil {
			return fmt.Errorf("read migration %s: %w", version, err)
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return fmt.Errorf("begin migration %s: %w", version, err)
		}
		// No arguments: the simple protocol runs the file's statements.
		if _, err := tx.Exec(ctx, string(body)); err != nil {
			_ = tx.Rollback(ctx)
			return fmt.Errorf("apply migration %s: %w", version, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO sendonce_migrations (version, applied_at) VALUES ($1, $2)", version, micros(time.Now())); err != nil {
			_ = tx.Rollback(ctx)
			return fmt.Errorf("record migration %s: %w", version, err)
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("commit migration %s: %w", version, err)
		}
	}
	if also != nil {
		if err := also(ctx, s.PG); err != nil {
			return err
		}
	}
	return nil
}
