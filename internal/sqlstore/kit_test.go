package sqlstore_test

// The kit of the store's conformance suite: every test runs against each
// database the store supports (SQLite always; PostgreSQL when
// SENDONCE_TEST_POSTGRES_URL names a server), one copy of each test over a
// table of backends.

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

// backend is a database the store runs on.
type backend struct {
	name string
	// newDB creates an empty database and returns its address.
	newDB func(t *testing.T) string
	// open opens (and migrates) the database at addr.
	open func(ctx context.Context, addr string) (*sqlstore.Store, error)
}

var backends = []backend{
	{
		name: "sqlite",
		// Directories that do not exist yet: Open creates them.
		newDB: func(t *testing.T) string { return filepath.Join(t.TempDir(), "a", "b", "sendonce.db") },
		open:  sqlstore.Open,
	},
	{
		name:  "postgres",
		newDB: func(t *testing.T) string { return pgtest.NewDatabase(t) },
		open: func(ctx context.Context, url string) (*sqlstore.Store, error) {
			return sqlstore.OpenPostgres(ctx, url, sqlstore.PostgresOptions{})
		},
	},
}

// forEachBackend runs fn as a parallel subtest per backend; the postgres
// subtest is skipped, saying how to enable it, when no server is configured.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			if b.name == "postgres" {
				pgtest.URL(t)
			}
			t.Parallel()
			fn(t, b)
		})
	}
}

// forEachStore runs fn per backend on a fresh, migrated store.
func forEachStore(t *testing.T, fn func(t *testing.T, s *sqlstore.Store)) {
	t.Helper()
	forEachBackend(t, func(t *testing.T, b backend) {
		fn(t, b.openStore(t, b.migratedDB(t)))
	})
}

// migratedDB is newDB already migrated: a copy of a database this process
// migrated once (two seconds of CPU each time under the race detector on
// SQLite, half a second of the server's on PostgreSQL). The tests of the
// migrations themselves start from newDB.
func (b backend) migratedDB(t *testing.T) string {
	t.Helper()
	if b.name == "postgres" {
		return pgTemplate.NewDatabase(t)
	}
	sqliteTemplate.once.Do(func() {
		dir, err := os.MkdirTemp("", "sqlstore-template-")
		if err != nil {
			sqliteTemplate.err = err
			return
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "template.db")
		s, err := sqlstore.Open(context.Background(), path)
		if err == nil {
			err = s.Close()
		}
		if err == nil {
			sqliteTemplate.bytes, err = os.ReadFile(path)
		}
		sqliteTemplate.err = err
	})
	if sqliteTemplate.err != nil {
		t.Fatalf("template database: %v", sqliteTemplate.err)
	}
	path := b.newDB(t)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, sqliteTemplate.bytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var (
	pgTemplate = &pgtest.Template{Build: func(url string) error {
		s, err := sqlstore.OpenPostgres(context.Background(), url, sqlstore.PostgresOptions{})
		if err != nil {
			return err
		}
		return s.Close()
	}}
	sqliteTemplate struct {
		once  sync.Once
		bytes []byte
		err   error
	}
)

// openStore opens addr; t.Cleanup closes the store.
func (b backend) openStore(t *testing.T, addr string) *sqlstore.Store {
	t.Helper()
	s, err := b.open(context.Background(), addr)
	if err != nil {
		t.Fatalf("open %s: %v", b.name, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// inTx runs fn in one write transaction and fails the test on an error.
func inTx(t *testing.T, s *sqlstore.Store, fn func(ctx context.Context, tx core.Tx) error) {
	t.Helper()
	ctx := context.Background()
	if err := s.InTx(ctx, func(tx core.Tx) error { return fn(ctx, tx) }); err != nil {
		t.Fatalf("transaction: %v", err)
	}
}

// migrations counts the schema migrations of the backend's dialect.
func migrations(t *testing.T, dialect string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("migrations", dialect, "*.sql"))
	shared, err2 := filepath.Glob(filepath.Join("migrations", "shared", "*.sql"))
	if err != nil || err2 != nil || len(files) == 0 || len(shared) == 0 {
		t.Fatalf("no migrations for %s (%v, %v)", dialect, err, err2)
	}
	return len(files) + len(shared)
}

// queryInt runs a query (? placeholders) that returns one integer.
func queryInt(t *testing.T, s *sqlstore.Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("query %q: %v", query, err)
	}
	return n
}

// openSQLiteFile opens a fresh SQLite store in a file of the test's own,
// for a migration test: it rewinds the schema (execAll), closes the store
// and opens path again, which runs what the rewind unrecorded.
func openSQLiteFile(t *testing.T) (*sqlstore.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sendonce.db")
	s, err := sqlstore.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return s, path
}

// execAll runs each statement on s, in order, and fails the test at the
// first error.
func execAll(t *testing.T, s *sqlstore.Store, statements ...string) {
	t.Helper()
	for _, q := range statements {
		if _, err := s.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
