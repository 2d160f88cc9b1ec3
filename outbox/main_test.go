package outbox_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/sendonce/sendonce/client"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
	"github.com/sendonce/sendonce/outbox"
)

// The SIGKILL test runs the outbox in a child process: this test binary
// again, with childEnv set, which runs childMain instead of the tests.
const (
	childEnv     = "SENDONCE_OUTBOX_TEST_CHILD"
	childMaxLife = 90 * time.Second // a child outlives no parent by long
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := childMain(); err != nil {
			fmt.Fprintln(os.Stderr, "outbox child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childMain runs outbox.Run on the database and server the parent names in
// the environment, until SIGTERM or SIGKILL.
func childMain() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, childMaxLife)
	defer cancel()
	dialect := outbox.Dialect(os.Getenv("OUTBOX_DIALECT"))
	db, err := openDB(dialect, os.Getenv("OUTBOX_DSN"))
	if err != nil {
		return err
	}
	defer db.Close()
	c, err := client.New(client.Config{BaseURL: os.Getenv("OUTBOX_API_URL"), APIKey: os.Getenv("OUTBOX_API_KEY"),
		Timeout: 3 * time.Second, MaxAttempts: 2, BaseDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond})
	if err != nil {
		return err
	}
	ob, err := outbox.New(db, outbox.Config{Dialect: dialect, Table: os.Getenv("OUTBOX_TABLE"), Client: c,
		Workers: 4, PollInterval: 20 * time.Millisecond, Lease: 1500 * time.Millisecond, RetryBase: 50 * time.Millisecond,
		RetryMax: 200 * time.Millisecond, MaxAttempts: 20, WorkerID: "child-" + os.Getenv("OUTBOX_CHILD_N")})
	if err != nil {
		return err
	}
	fmt.Println("ready")
	return ob.Run(ctx)
}

func driverName(d outbox.Dialect) string {
	if d == outbox.Postgres {
		return "pgx"
	}
	return "sqlite"
}

func openDB(d outbox.Dialect, dsn string) (*sql.DB, error) {
	db, err := sql.Open(driverName(d), dsn)
	if err != nil {
		return nil, err
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// store is one task table in one database, for one test.
type store struct {
	dialect outbox.Dialect
	dsn     string
	table   string
	db      *sql.DB
}

// backend is a database the outbox tests run against.
type backend struct {
	name    string
	dialect outbox.Dialect
	newDSN  func(t *testing.T) (dsn, table string)
}

func backends() []backend {
	return []backend{
		{name: "sqlite", dialect: outbox.SQLite, newDSN: func(t *testing.T) (string, string) {
			path := t.TempDir() + "/app.db"
			return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)", outbox.DefaultTable
		}},
		{name: "postgres", dialect: outbox.Postgres, newDSN: func(t *testing.T) (string, string) {
			url := pgtest.URL(t) // skips, saying how, off CI; fails under CI
			// One table per test, so tests and runs never see each other's tasks.
			b := make([]byte, 6)
			_, _ = rand.Read(b)
			return url, "outbox_test_" + hex.EncodeToString(b)
		}},
	}
}

// forEachBackend runs f as a subtest per database.
func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// open makes a fresh, migrated task table.
func (b backend) open(t *testing.T) *store {
	t.Helper()
	dsn, table := b.newDSN(t)
	db, err := openDB(b.dialect, dsn)
	if err != nil {
		t.Fatalf("open %s: %v", b.name, err)
	}
	st := &store{dialect: b.dialect, dsn: dsn, table: table, db: db}
	t.Cleanup(func() {
		if b.dialect == outbox.Postgres {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + table)
			_, _ = db.Exec("DROP TABLE IF EXISTS " + table + "_users")
		}
		db.Close()
	})
	if err := outbox.MigrateTable(context.Background(), db, b.dialect, table); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	// Migrate twice: it must be idempotent.
	if err := outbox.MigrateTable(context.Background(), db, b.dialect, table); err != nil {
		t.Fatalf("migrate again: %v", err)
	}
	return st
}

// second opens another handle on the same database (another "process").
func (s *store) second(t *testing.T) *sql.DB {
	t.Helper()
	db, err := openDB(s.dialect, s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func (s *store) placeholder(n int) string {
	if s.dialect == outbox.Postgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

func (s *store) rebind(q string) string {
	if s.dialect != outbox.Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString(s.placeholder(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
