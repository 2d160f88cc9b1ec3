package sendoncetest

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the driver sendonce's SQLite store uses
)

// HoldWrites holds, from outside sendonce, the lock its next accepted send
// waits for on db (a --db value): SQLite's write lock, or PostgreSQL's
// table lock on sends. As a long transaction of another process would,
// it keeps the commit waiting until release is called (once is enough;
// more calls do nothing).
func HoldWrites(t testing.TB, db string) (release func()) {
	t.Helper()
	ctx := context.Background()
	var once sync.Once
	if path, ok := strings.CutPrefix(db, "sqlite:"); ok {
		sdb, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		conn, err := sdb.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatalf("BEGIN IMMEDIATE: %v", err)
		}
		return func() {
			once.Do(func() { _, _ = conn.ExecContext(ctx, "ROLLBACK"); conn.Close(); sdb.Close() })
		}
	}
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE sends IN EXCLUSIVE MODE"); err != nil {
		t.Fatalf("lock sends: %v", err)
	}
	return func() { once.Do(func() { _ = tx.Rollback(ctx); _ = conn.Close(ctx) }) }
}
