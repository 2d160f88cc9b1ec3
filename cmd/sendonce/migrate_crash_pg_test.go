package main_test

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/sqlstore"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

// On PostgreSQL too, a process killed while migration 0040 holds sends
// leaves nothing of it (each migration is one transaction, never
// committed without its client): the next run applies it once, and a key
// accepted before the upgrade still replays.
func TestCrash_KilledDuringTheOneRowMigrationPostgres(t *testing.T) {
	binaryTest(t)
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	sc := idempotency.Scope{Tenant: "t", Method: "POST", Route: "/v1/send", Key: "before-upgrade"}
	s, err := sqlstore.OpenPostgres(ctx, url, sqlstore.PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := insertSendBeforeUpgrade(t, s, sc)
	stmts := []string{
		`INSERT INTO idempotency_keys (tenant, method, route, key, fingerprint, state, token, locked_until, status, content_type, body, created_at, completed_at, expires_at)
		VALUES ('t', 'POST', '/v1/send', 'before-upgrade', 'fp', 'completed', 'tok', 0, 200, 'application/json', convert_to('{"id":"snd_old"}', 'UTF8'), 0, 0, ` +
			fmt.Sprint(now.Add(time.Hour).UnixMicro()) + `)`,
		`INSERT INTO sends (id, tenant, idempotency_key, mailbox_id, status, from_addr, to_addrs, cc_addrs, bcc_addrs, reply_to, subject, text_body, html_body, headers, tags, message_id, created_at, updated_at)
		SELECT 'snd_bulk_' || i, 't', 'bulk-' || i, 'default', 'sent', 'me@example.com', '["a@example.com"]', '[]', '[]', '[]', 's', 't', '', '[]', '{}', '<m' || i || '@x>', i, i
		FROM generate_series(1, ` + fmt.Sprint(migrationSends) + `) i`,
		"DROP INDEX sends_idem", "DROP INDEX sends_caller_key", "DROP INDEX sends_idem_expires",
		"CREATE INDEX sends_tenant_idempotency_key ON sends (tenant, idempotency_key)",
	}
	for _, c := range []string{"method", "route", "key", "fingerprint", "token", "status", "content_type", "body", "expires_at"} {
		stmts = append(stmts, "ALTER TABLE sends DROP COLUMN idem_"+c)
	}
	stmts = append(stmts, "DELETE FROM sendonce_migrations WHERE version = '0040_send_idempotency_record.sql'")
	for _, q := range stmts {
		if _, err := s.Exec(ctx, q); err != nil {
			t.Fatalf("%.80s: %v", q, err)
		}
	}

	cmd := exec.Command(binPath, "migrate", "--db", url)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed once another session holds sends exclusively: the migration's
	// ALTER TABLE, inside its transaction.
	locked := func() bool {
		var n int
		err := s.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			WHERE c.relname = 'sends' AND l.mode = 'AccessExclusiveLock' AND l.granted AND l.pid <> pg_backend_pid()`).Scan(&n)
		return err == nil && n > 0
	}
	deadline := time.Now().Add(20 * time.Second)
	for !locked() && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if time.Now().After(deadline) {
		t.Fatal("the migrating process never held sends")
	}
	// Its backend ends when it next speaks to the gone client; its
	// transaction rolls back.
	for deadline := time.Now().Add(30 * time.Second); locked() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	var n int
	if err := s.QueryRow(ctx, "SELECT count(*) FROM sendonce_migrations WHERE version = '0040_send_idempotency_record.sql'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("migration 0040 recorded %d times after the kill (%v), want none", n, err)
	}
	if err := s.QueryRow(ctx, "SELECT count(*) FROM information_schema.columns WHERE table_name = 'sends' AND column_name LIKE 'idem!_%' ESCAPE '!'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d of the migration's columns left after the kill (%v), want none: half a migration", n, err)
	}
	s.Close()

	run(t, binPath, "migrate", "--db", url)
	s, err = sqlstore.OpenPostgres(ctx, url, sqlstore.PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	requireUpgraded(t, s, sc)
}
