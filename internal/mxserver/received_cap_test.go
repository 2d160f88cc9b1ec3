package mxserver_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/jackc/pgx/v5"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	_ "modernc.org/sqlite"
)

// holdUsage plays another receive of the tenant that has counted its bytes
// in the usage row and not committed yet: it sets the row to bytes in a
// transaction of its own, held until commit is called.
func holdUsage(t *testing.T, env *sendoncetest.Env, bytes int64) (commit func()) {
	t.Helper()
	ctx := context.Background()
	const upsert = `INSERT INTO received_usage (tenant, messages, bytes) VALUES ('default', 2, %d)
		ON CONFLICT (tenant) DO UPDATE SET messages = 2, bytes = %d`
	if env.DBPath != "" {
		db, err := sql.Open("sqlite", "file:"+env.DBPath+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, fmt.Sprintf(upsert, bytes, bytes)); err != nil {
			t.Fatal(err)
		}
		return func() { _, _ = conn.ExecContext(ctx, "COMMIT"); conn.Close(); db.Close() }
	}
	conn, err := pgx.Connect(ctx, env.DB)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf(upsert, bytes, bytes)); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Commit(ctx); _ = conn.Close(ctx) }
}

// submit hands raw to the listener at addr for rcpt; every failure is
// its error, so it may run off the test goroutine.
func submit(addr, from, rcpt string, raw []byte) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.SendMail(from, []string{rcpt}, bytes.NewReader(raw))
}

// waitForLockWaiter returns once a PostgreSQL session of env's database
// waits on a lock (the receive, on the usage row holdUsage holds); on
// SQLite, which shows no waiters, at once: there the one writer's lock
// orders the two whenever the receive comes.
func waitForLockWaiter(t *testing.T, env *sendoncetest.Env) {
	t.Helper()
	if env.DBPath != "" {
		return
	}
	const q = `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`
	for i := 0; env.QueryInt(t, q) == 0; i++ {
		if i == 1000 {
			t.Fatal("the receive never waited on the usage row")
		}
		time.Sleep(10 * time.Millisecond) // polling what PostgreSQL shows, bounded
	}
}

// TestReceiving_StorageCapHoldsUnderConcurrentReceives: a receive that
// starts while another of the tenant's is storing its message (and has
// not committed) checks the cap against what that one stores: the cap
// is read in the transaction that adds to it, so two receives cannot
// together go past it. Read before, from the read pool, the first's bytes
// were not seen yet on PostgreSQL and both were stored; on SQLite the one
// writer's lock already ordered them, and the test shows it stays so.
func TestReceiving_StorageCapHoldsUnderConcurrentReceives(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		raw := []byte(strings.Replace(plainMail, "<m1@", "<concurrent@", 1))
		size := int64(len(raw))
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, SMTP: true, Inbound: true, MaxReceivedBytes: 2*size + size/2})
		createInbox(t, env, "support@recv.test")

		commit := holdUsage(t, env, 2*size)
		done := make(chan error, 1)
		go func() { done <- submit(env.InboundAddr, "alice@sender.test", "support@recv.test", raw) }()
		waitForLockWaiter(t, env)
		commit()
		select {
		case err := <-done:
			if smtpCode(err) != 452 {
				t.Fatalf("receive while another filled the room: %v, want 452", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the receive did not finish")
		}
		if n := env.QueryInt(t, "SELECT count(*) FROM received_messages"); n != 0 {
			t.Fatalf("%d messages stored past the cap, want 0", n)
		}
	})
}
