package sqlstore_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// idempotencyKeysBefore0016 is the table as migration 0001 made it.
const idempotencyKeysBefore0016 = `CREATE TABLE idempotency_keys (
    tenant TEXT NOT NULL, method TEXT NOT NULL, route TEXT NOT NULL, key TEXT NOT NULL,
    fingerprint TEXT NOT NULL, state TEXT NOT NULL CHECK (state IN ('in_flight', 'completed')),
    token TEXT NOT NULL, locked_until INTEGER NOT NULL, status INTEGER, content_type TEXT, body BLOB,
    created_at INTEGER NOT NULL, completed_at INTEGER, expires_at INTEGER,
    PRIMARY KEY (tenant, method, route, key)
) WITHOUT ROWID`

// A SQLite database made before migration 0016 keeps its keys: completed
// ones still replay (byte for byte) and refuse another payload, a
// reservation still holds its key, and the table is now a rowid table
// whose primary key still refuses a second record for one scoped key.
func TestMigration0016_IdempotencyKeysBecomeARowidTableAndKeepTheirRecords(t *testing.T) {
	ctx := context.Background()
	s, path := openSQLiteFile(t)
	execAll(t, s, "DROP TABLE idempotency_keys", idempotencyKeysBefore0016,
		"CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at)",
		"DELETE FROM sendonce_migrations WHERE version = '0016_idempotency_rowid.sql'")
	now := time.Now()
	done := sendScope("done")
	running := done
	running.Key = "running"
	body := []byte("{\"id\":\"snd_1\"}\n\x00\xff")
	if err := s.InTx(ctx, func(tx core.Tx) error {
		return tx.PutIdempotency(ctx, done, "fp", idempotency.NewToken(),
			idempotency.Response{Status: 200, ContentType: "application/json", Body: body}, now, now.Add(time.Hour))
	}); err != nil {
		t.Fatal(err)
	}
	putReservation(t, s, running, "fp", now.Add(time.Hour))
	s.Close()

	s, err := sqlstore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ddl string
	if err := s.QueryRow(ctx, "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'idempotency_keys'").Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToUpper(ddl), "WITHOUT ROWID") {
		t.Errorf("idempotency_keys is still WITHOUT ROWID after the migration: %s", ddl)
	}
	d := decide(t, s, done, "fp", now, nil)
	if d.Outcome != idempotency.Replay || !bytes.Equal(d.Response.Body, body) || d.Response.Status != 200 {
		t.Fatalf("completed key after the migration: %+v, want its replay", d)
	}
	if d := decide(t, s, done, "other", now, nil); d.Outcome != idempotency.Mismatch {
		t.Errorf("completed key with another payload: %v, want mismatch", d.Outcome)
	}
	if d := decide(t, s, running, "fp", now, nil); d.Outcome != idempotency.InUse {
		t.Errorf("reserved key after the migration: %v, want in use", d.Outcome)
	}
	if _, err := s.Exec(ctx, `INSERT INTO idempotency_keys (tenant, method, route, key, fingerprint, state, token, locked_until, created_at)
		VALUES ('t', 'POST', '/v1/send', 'done', 'fp', 'in_flight', 'x', 0, 0)`); err == nil {
		t.Error("a second record for one scoped key was accepted")
	}
	if n := queryInt(t, s, "SELECT count(*) FROM idempotency_keys"); n != 2 {
		t.Errorf("%d records after the migration, want 2", n)
	}
}
