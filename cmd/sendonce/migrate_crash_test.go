package main_test

import (
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// migrationSends is how many sends the upgraded database holds: enough
// that migration 0040's index builds take a moment a kill can land in.
const migrationSends = 50_000

// A process killed while migration 0040 runs leaves the database as it
// was (the migrations are one transaction); the next run applies it once,
// and a key accepted before the upgrade still replays.
func TestCrash_KilledDuringTheOneRowMigration(t *testing.T) {
	binaryTest(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sendonce.db")
	sc := idempotency.Scope{Tenant: "t", Method: "POST", Route: "/v1/send", Key: "before-upgrade"}
	seedBeforeOneRow(t, path, sc)

	// Killed the moment the migrating process holds the database's write
	// lock: the migration's transaction is open, its index builds under way.
	cmd := exec.Command(binPath, "migrate", "--db", "sqlite:"+path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitWriteLocked(t, path, 20*time.Second) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("the migrating process never held the write lock")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if migrationApplied(t, path) {
		t.Fatal("the migration committed before the kill: seed more sends")
	}

	run(t, binPath, "migrate", "--db", "sqlite:"+path)
	s, err := sqlstore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	requireUpgraded(t, s, sc)
}

// requireUpgraded checks a database after migration 0040 ran once more,
// to the end: applied once, every send kept, the key accepted before the
// upgrade replaying and found by the lookup by key.
func requireUpgraded(t *testing.T, s *sqlstore.Store, sc idempotency.Scope) {
	t.Helper()
	ctx := context.Background()
	var n int
	if err := s.QueryRow(ctx, "SELECT count(*) FROM sendonce_migrations WHERE version = '0040_send_idempotency_record.sql'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("migration 0040 recorded %d times (%v), want once", n, err)
	}
	if err := s.QueryRow(ctx, "SELECT count(*) FROM sends").Scan(&n); err != nil || n != migrationSends+1 {
		t.Fatalf("%d sends after the upgrade (%v), want %d", n, err, migrationSends+1)
	}
	var d idempotency.Decision
	err := s.InTx(ctx, func(tx core.Tx) error {
		var err error
		d, err = tx.DecideIdempotency(ctx, sc, "fp", time.Now())
		return err
	})
	if err != nil || d.Outcome != idempotency.Replay || string(d.Response.Body) != `{"id":"snd_old"}` {
		t.Fatalf("the key accepted before the upgrade: %v %+v (%v), want its answer replayed", d.Outcome, d.Response, err)
	}
	sends, _, err := s.ListSends(ctx, "t", core.SendFilter{IdempotencyKey: sc.Key, Limit: 5})
	if err != nil || len(sends) != 1 || sends[0].ID != "snd_old" {
		t.Fatalf("lookup by key after the upgrade: %d sends (%v), want snd_old", len(sends), err)
	}
}

// seedBeforeOneRow makes a database as a release before migration 0040
// left it: one accepted send with its record in idempotency_keys, many
// other sends, and the schema of 0039.
func seedBeforeOneRow(t *testing.T, path string, sc idempotency.Scope) {
	t.Helper()
	ctx := context.Background()
	s, err := sqlstore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	now := insertSendBeforeUpgrade(t, s, sc)
	cols := sendColumnsOf(t, s)
	sel := slices.Clone(cols)
	for i, c := range sel {
		switch c {
		case "id":
			sel[i] = "'snd_bulk_' || i"
		case "idempotency_key":
			sel[i] = "'bulk-' || i"
		}
	}
	// 0039's schema first, while sends holds one row: SQLite rewrites the
	// whole table for each dropped column, so dropping them after the
	// bulk insert cost nine copies of it (most of this test's minutes
	// under the race detector). The index 0040 drops is built after the
	// insert, in one pass.
	stmts := []string{
		`INSERT INTO idempotency_keys (tenant, method, route, key, fingerprint, state, token, locked_until, status, content_type, body, created_at, completed_at, expires_at)
		VALUES ('t', 'POST', '/v1/send', 'before-upgrade', 'fp', 'completed', 'tok', 0, 200, 'application/json', CAST('{"id":"snd_old"}' AS BLOB), 0, 0, ` +
			fmt.Sprint(now.Add(time.Hour).UnixMicro()) + `)`,
		"DROP INDEX sends_idem", "DROP INDEX sends_caller_key", "DROP INDEX sends_idem_expires",
	}
	for _, c := range []string{"method", "route", "key", "fingerprint", "token", "status", "content_type", "body", "expires_at"} {
		stmts = append(stmts, "ALTER TABLE sends DROP COLUMN idem_"+c)
	}
	stmts = append(stmts,
		`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < `+fmt.Sprint(migrationSends)+`)
		INSERT INTO sends (`+strings.Join(cols, ", ")+`) SELECT `+strings.Join(sel, ", ")+` FROM n, sends WHERE id = 'snd_old'`,
		"CREATE INDEX sends_tenant_idempotency_key ON sends (tenant, idempotency_key)",
		"DELETE FROM sendonce_migrations WHERE version = '0040_send_idempotency_record.sql'", "PRAGMA wal_checkpoint(TRUNCATE)")
	for _, q := range stmts {
		if _, err := s.Exec(ctx, q); err != nil {
			t.Fatalf("%.80s: %v", q, err)
		}
	}
	s.Close()
}

// sendColumnsOf lists sends' columns that are not the record's.
func sendColumnsOf(t *testing.T, s *sqlstore.Store) []string {
	t.Helper()
	var cols []string
	for i := 0; ; i++ {
		var name string
		err := s.QueryRow(context.Background(), "SELECT name FROM pragma_table_info('sends') LIMIT 1 OFFSET ?", i).Scan(&name)
		if err == sql.ErrNoRows {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(name, "idem_") {
			cols = append(cols, name)
		}
	}
	return cols
}

// waitWriteLocked polls until another process holds path's write lock
// (BEGIN IMMEDIATE is refused at once), within timeout.
func waitWriteLocked(t *testing.T, path string, timeout time.Duration) bool {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			if strings.Contains(err.Error(), "locked") || strings.Contains(err.Error(), "busy") {
				return true
			}
			t.Fatalf("probe the write lock: %v", err)
		}
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
	}
	return false
}

// migrationApplied reads, without migrating, whether 0040 is recorded.
func migrationApplied(t *testing.T, path string) bool {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM sendonce_migrations WHERE version = '0040_send_idempotency_record.sql'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// insertSendBeforeUpgrade inserts, through s, the send that a key
// accepted before the upgrade points at ("snd_old", sent), and returns
// the time it was made at, which the seeds' own rows reuse.
func insertSendBeforeUpgrade(t *testing.T, s *sqlstore.Store, sc idempotency.Scope) time.Time {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	old := &core.Send{ID: "snd_old", Tenant: sc.Tenant, IdempotencyKey: sc.Key, MailboxID: "default", Status: core.StatusSent,
		From: "me@example.com", To: []string{"ann@example.com"}, Subject: "s", Text: "t", MessageID: "<old@example.com>",
		CreatedAt: now, UpdatedAt: now}
	if err := s.InTx(ctx, func(tx core.Tx) error { return tx.InsertSend(ctx, old) }); err != nil {
		t.Fatal(err)
	}
	return now
}
