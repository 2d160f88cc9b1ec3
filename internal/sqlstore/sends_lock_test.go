package sqlstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

// On PostgreSQL, SendForUpdateIn's locking read of a send in another
// status finds nothing and holds nothing; when another transaction gives
// the send back to one of the statuses (a deferred attempt back to queued)
// before the second, plain read, the caller is about to change it, so it
// must come back locked: returned unlocked, a cancel could overwrite a
// claim made meanwhile. Here another connection commits that
// change between the two reads, and then tries to take the row: it must
// find it held.
//
// PostgreSQL only: SQLite's write transaction excludes every other writer,
// so no status moves between its reads.
func TestSendForUpdateIn_LocksASendThatCameIntoTheStatusesBetweenItsReads(t *testing.T) {
	pgtest.URL(t)
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	s := openPGStore(t, url, PostgresOptions{WriteLanes: 1})
	now := time.Now()
	if err := s.InTx(ctx, func(tx core.Tx) error {
		return tx.InsertSend(ctx, &core.Send{ID: "snd_moving", Tenant: "t", MailboxID: "default", Status: core.StatusSending,
			From: "me@example.com", MessageID: "<snd_moving@example.com>", CreatedAt: now, UpdatedAt: now})
	}); err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(ctx, url) // another process's connection
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)

	// The plain read comes only after a locking read that found nothing:
	// just before the first one, the other connection commits the change.
	plainRead := `SELECT ` + sendColumns + ` FROM sends WHERE id = ?`
	var moveErr error
	moved := false
	hookStatements(s, func(q string) {
		if q == plainRead && !moved {
			moved = true
			_, moveErr = other.Exec(ctx, `UPDATE sends SET status = 'queued' WHERE id = 'snd_moving'`)
		}
	})

	var got *core.Send
	var takeErr error
	err = s.InTx(ctx, func(tx core.Tx) error {
		var err error
		if got, err = tx.SendForUpdateIn(ctx, "snd_moving", core.StatusQueued, core.StatusScheduled); err != nil {
			return err
		}
		// Still inside the transaction: may another take the row?
		_, takeErr = other.Exec(ctx, `SELECT id FROM sends WHERE id = 'snd_moving' FOR UPDATE NOWAIT`)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !moved || moveErr != nil {
		t.Fatalf("the status was not moved between the reads (moved %v: %v)", moved, moveErr)
	}
	if got.Status != core.StatusQueued {
		t.Fatalf("read as %s, want queued (as committed between the reads)", got.Status)
	}
	var pe *pgconn.PgError
	if !errors.As(takeErr, &pe) || pe.Code != "55P03" {
		t.Fatalf("another transaction could take the row (%v): SendForUpdateIn returned a send it will change unlocked", takeErr)
	}
}

// hookStatements has before called with every statement that s's write
// transactions run, just before it runs. Call it while s is idle.
func hookStatements(s *Store, before func(q string)) {
	begin := s.gc.begin
	s.gc.begin = func(ctx context.Context) (batchTx, error) {
		b, err := begin(ctx)
		b.q = hookedQuerier{querier: b.q, before: before}
		return b, err
	}
}

// hookedQuerier calls before ahead of each statement.
type hookedQuerier struct {
	querier
	before func(q string)
}

func (h hookedQuerier) exec(ctx context.Context, q string, args ...any) (int64, error) {
	h.before(q)
	return h.querier.exec(ctx, q, args...)
}

func (h hookedQuerier) queryRow(ctx context.Context, q string, args ...any) row {
	h.before(q)
	return h.querier.queryRow(ctx, q, args...)
}

func (h hookedQuerier) query(ctx context.Context, q string, args ...any) (rows, error) {
	h.before(q)
	return h.querier.query(ctx, q, args...)
}
