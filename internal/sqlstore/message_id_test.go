package sqlstore_test

import (
	"context"
	"testing"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// Two sends may carry one Message-ID — a client's message keeps its own,
// and two clients, two tenants even, may give the same one — on both
// databases.
func TestSends_MessageIDIsNotUnique(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.openStore(t, b.newDB(t))
		a, c := newSend("snd_a", core.StatusQueued, at(1)), newSend("snd_b", core.StatusQueued, at(2))
		c.Tenant = "other"
		c.MessageID = a.MessageID
		inTx(t, s, func(ctx context.Context, tx core.Tx) error { return tx.InsertSend(ctx, a) })
		inTx(t, s, func(ctx context.Context, tx core.Tx) error { return tx.InsertSend(ctx, c) })
		if n := queryInt(t, s, "SELECT count(*) FROM sends WHERE message_id = ?", a.MessageID); n != 2 {
			t.Fatalf("%d sends with the Message-ID, want 2", n)
		}
	})
}

// Migration 0027 rebuilds SQLite's sends table to drop the Message-ID's
// UNIQUE: every send and every row that points at one (events here) is
// still there afterwards — DROP TABLE with foreign keys on would have
// deleted them — and foreign keys are enforced again.
func TestMigration0027_RebuildKeepsSendsAndTheirChildren(t *testing.T) {
	ctx := context.Background()
	s, path := openSQLiteFile(t)
	sd := newSend("snd_kept", core.StatusQueued, at(1))
	inTx(t, s, func(ctx context.Context, tx core.Tx) error {
		if err := tx.InsertSend(ctx, sd); err != nil {
			return err
		}
		return tx.AddEvent(ctx, sd.ID, core.Event{Type: core.EventAccepted, At: at(1)})
	})
	events := queryInt(t, s, "SELECT count(*) FROM send_events WHERE send_id = ?", sd.ID)
	tags := queryInt(t, s, "SELECT count(*) FROM send_tags WHERE send_id = ?", sd.ID)
	if events == 0 || tags == 0 {
		t.Fatalf("%d events and %d tags stored before the migration, want some", events, tags)
	}
	execAll(t, s, "DELETE FROM sendonce_migrations WHERE version = '0027_message_id_not_unique.sql'")
	s.Close()

	s, err := sqlstore.Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen (migration 0027 runs again): %v", err)
	}
	defer s.Close()
	if n := queryInt(t, s, "SELECT count(*) FROM sends WHERE id = ?", sd.ID); n != 1 {
		t.Fatalf("%d sends after the rebuild, want 1", n)
	}
	if n := queryInt(t, s, "SELECT count(*) FROM send_events WHERE send_id = ?", sd.ID); n != events {
		t.Fatalf("%d events after the rebuild, want %d", n, events)
	}
	if n := queryInt(t, s, "SELECT count(*) FROM send_tags WHERE send_id = ?", sd.ID); n != tags {
		t.Fatalf("%d tags after the rebuild, want %d", n, tags)
	}
	err = s.InTx(ctx, func(tx core.Tx) error {
		return tx.AddEvent(ctx, "snd_missing", core.Event{Type: core.EventAccepted, At: at(2)})
	})
	if err == nil {
		t.Fatal("an event of no send committed: foreign keys are off after the migrations")
	}
}

// Migrations run with foreign keys off, so they are checked before the
// commit: a run that would leave a row pointing at nothing fails and
// commits nothing, instead of starting on a broken database.
func TestMigrations_RefuseToCommitBrokenForeignKeys(t *testing.T) {
	ctx := context.Background()
	s, path := openSQLiteFile(t)
	execAll(t, s, "PRAGMA foreign_keys = OFF",
		"INSERT INTO send_events (send_id, type, at, detail) VALUES ('snd_none', 'accepted', 1, '')",
		"PRAGMA foreign_keys = ON",
		"DELETE FROM sendonce_migrations WHERE version = '0027_message_id_not_unique.sql'")
	s.Close()
	if s, err := sqlstore.Open(ctx, path); err == nil {
		s.Close()
		t.Fatal("migrations committed over an event of no send")
	}
}
