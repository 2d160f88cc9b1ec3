package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
)

// SendForUpdateIn neither holds nor waits for the row of a send in
// another status. A cancel of a send that is being delivered used to
// lock its row (SendForUpdate) only to answer 409; with two batches on
// PostgreSQL, the one recording that send's outcome then waited for the
// cancel's batch while the cancel's batch waited for a row the claim in
// the first held: a deadlock, seen as a 500 in CI
// (TestSchedule_CancelRacesDelivery). Here another transaction holds the
// row of a sending send: the read must come back at once, as it is.
// And a scheduled send held by a claim that makes it sending is read
// again after the claim commits, as sending.
func TestSendForUpdateIn_DoesNotWaitForARowItWillNotChange(t *testing.T) {
	pgtest.URL(t)
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	s := openPostgres(t, url)
	inTx(t, s, func(ctx context.Context, tx core.Tx) error {
		if err := tx.InsertSend(ctx, newSend("snd_sending", core.StatusSending, at(0))); err != nil {
			return err
		}
		return tx.InsertSend(ctx, newSend("snd_scheduled", core.StatusScheduled, at(0)))
	})
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)

	// Another transaction holds the sending send's row.
	holder, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `SELECT id FROM sends WHERE id = 'snd_sending' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	got := readIn(t, s, "snd_sending", 3*time.Second, func() { _ = holder.Rollback(ctx) })
	if got.Status != core.StatusSending {
		t.Errorf("sending send read as %s", got.Status)
	}
	_ = holder.Rollback(ctx)

	// A claim holds the scheduled send and makes it sending: the read
	// waits for it, and sees what it committed.
	claim, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := claim.Exec(ctx, `UPDATE sends SET status = 'sending' WHERE id = 'snd_scheduled'`); err != nil {
		t.Fatal(err)
	}
	committed := make(chan error, 1)
	time.AfterFunc(300*time.Millisecond, func() { committed <- claim.Commit(ctx) })
	got = readIn(t, s, "snd_scheduled", 5*time.Second, nil)
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if got.Status != core.StatusSending {
		t.Errorf("scheduled send claimed meanwhile read as %s, want sending", got.Status)
	}
}

// readIn reads id with SendForUpdateIn(scheduled) in a transaction of the
// store and fails if that takes longer than within (then release lets it
// finish).
func readIn(t *testing.T, s *sqlstore.Store, id string, within time.Duration, release func()) *core.Send {
	t.Helper()
	var got *core.Send
	done := make(chan error, 1)
	go func() {
		done <- s.InTx(context.Background(), func(tx core.Tx) error {
			var err error
			got, err = tx.SendForUpdateIn(context.Background(), id, core.StatusScheduled)
			return err
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
	case <-time.After(within):
		if release != nil {
			release()
		}
		<-done
		t.Fatalf("read of %s waited %v for a row lock", id, within)
	}
	return got
}
