package idempotency

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // "pgx" database/sql driver
	_ "modernc.org/sqlite"             // "sqlite" database/sql driver

	"github.com/sendonce/sendonce/idempotency/redisstore"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
	"github.com/sendonce/sendonce/internal/testkit/redistest"
)

// storeCase is one Store implementation the conformance suite runs on.
type storeCase struct {
	name string
	open func(t testing.TB) Store
}

func storeCases() []storeCase {
	return []storeCase{
		{"memory", func(testing.TB) Store { return NewMemoryStore() }},
		{"sqlite", func(t testing.TB) Store { return openSQLite(t) }},
		{"postgres", func(t testing.TB) Store { return openPostgres(t) }},
		{"redis", func(t testing.TB) Store { return openRedis(t) }},
	}
}

// openSQLiteDB opens a fresh SQLite database in a temporary directory.
func openSQLiteDB(t testing.TB) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "idem.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// migrated migrates db as d speaks and returns the store on it.
func migrated(t testing.TB, db *sql.DB, d Dialect) *SQLStore {
	t.Helper()
	if err := Migrate(context.Background(), db, d); err != nil {
		t.Fatal(err)
	}
	return NewSQLStore(db, d)
}

func openSQLite(t testing.TB) *SQLStore {
	t.Helper()
	return migrated(t, openSQLiteDB(t), SQLite)
}

func openPostgresDB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(20)
	// Registered after NewDatabase's cleanup, so it runs before the drop.
	t.Cleanup(func() { db.Close() })
	return db
}

func openPostgres(t testing.TB) *SQLStore {
	t.Helper()
	return migrated(t, openPostgresDB(t), PostgreSQL)
}

// redisClient and testPrefix are redistest's, named for the tests here.
var (
	redisClient = redistest.Client
	testPrefix  = redistest.Prefix
)

func openRedis(t testing.TB) *redisstore.Store {
	t.Helper()
	c := redisClient(t)
	return redisstore.New(c, testPrefix(t, c))
}

// StoreOpener names one store the conformance suite runs on (exported to
// the external test package, conformance_ext_test.go).
type StoreOpener struct {
	Name string
	Open func(t testing.TB) Store
}

// StoreOpeners returns every store of this package, opened fresh per call.
func StoreOpeners() []StoreOpener {
	var out []StoreOpener
	for _, sc := range storeCases() {
		out = append(out, StoreOpener{Name: sc.name, Open: sc.open})
	}
	return out
}
