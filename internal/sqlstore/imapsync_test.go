package sqlstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

func connectMailbox(t *testing.T, s *sqlstore.Store, id string, imap []byte) {
	t.Helper()
	err := s.InTx(context.Background(), func(tx core.Tx) error {
		return tx.InsertMailbox(context.Background(), &core.Mailbox{Tenant: "t1", ID: id, Address: id + "@example.com",
			IMAP: imap, IMAPShown: "imap://u@h:143", CreatedAt: time.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Two stores on one database stand for two processes: the lease goes to
// one holder until it ends or is given up, and only the holder writes the
// sync state.
func TestIMAPSync_OneHolderAtATime(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		addr := b.newDB(t)
		s1, s2 := b.openStore(t, addr), b.openStore(t, addr)
		connectMailbox(t, s1, "support", []byte("sealed"))
		connectMailbox(t, s1, "plain", nil)

		ms, err := s2.ConnectedMailboxes(ctx)
		if err != nil || len(ms) != 1 || ms[0].ID != "support" || string(ms[0].IMAP) != "sealed" || ms[0].IMAPShown != "imap://u@h:143" {
			t.Fatalf("ConnectedMailboxes = %+v, %v; want support only", ms, err)
		}
		now := time.Now()
		lease := func(s *sqlstore.Store, holder string, at time.Time) bool {
			t.Helper()
			var ok bool
			if err := s.InTx(ctx, func(tx core.Tx) (err error) {
				ok, err = tx.LeaseIMAPSync(ctx, "t1", "support", holder, at, at.Add(time.Minute))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !lease(s1, "p1", now) || lease(s2, "p2", now) {
			t.Fatal("the first holder must get the lease and the second not")
		}
		if !lease(s1, "p1", now.Add(30*time.Second)) {
			t.Fatal("the holder must renew its lease")
		}
		save := func(s *sqlstore.Store, holder string, st *core.IMAPSync) bool {
			t.Helper()
			var ok bool
			if err := s.InTx(ctx, func(tx core.Tx) (err error) { ok, err = tx.SaveIMAPSync(ctx, holder, st); return err }); err != nil {
				t.Fatal(err)
			}
			return ok
		}
		st := &core.IMAPSync{Tenant: "t1", MailboxID: "support", UIDValidity: 4000000000, LastUID: 7, Status: core.IMAPSyncing, UpdatedAt: now}
		if save(s2, "p2", st) {
			t.Fatal("a process without the lease saved the sync state")
		}
		if !save(s1, "p1", st) {
			t.Fatal("the holder could not save the sync state")
		}
		got, err := s2.IMAPSyncState(ctx, "t1", "support")
		if err != nil || got.UIDValidity != 4000000000 || got.LastUID != 7 {
			t.Fatalf("IMAPSyncState = %+v, %v", got, err)
		}
		if lease(s2, "p2", now.Add(89*time.Second)) {
			t.Fatal("the lease was taken before it ended")
		}
		if !lease(s2, "p2", now.Add(91*time.Second)) {
			t.Fatal("an ended lease must go to the next process")
		}
		if err := s2.InTx(ctx, func(tx core.Tx) error { return tx.ReleaseIMAPSync(ctx, "t1", "support", "p2") }); err != nil {
			t.Fatal(err)
		}
		if !lease(s1, "p1", now.Add(92*time.Second)) {
			t.Fatal("a released lease must be free")
		}
		if _, err := s1.IMAPSyncState(ctx, "t1", "plain"); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("a mailbox never synced: %v, want ErrNotFound", err)
		}
	})
}

// A send is owed one Sent copy, only when its mailbox is connected, and
// one claimer works it at a time.
func TestIMAPAppends_OncePerSendOfAConnectedMailbox(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		connectMailbox(t, s, "support", []byte("sealed"))
		connectMailbox(t, s, "plain", nil)
		now := time.Now()
		inTx := func(fn func(tx core.Tx) error) {
			t.Helper()
			if err := s.InTx(ctx, fn); err != nil {
				t.Fatal(err)
			}
		}
		inTx(func(tx core.Tx) error {
			for _, q := range [][2]string{{"snd_1", "support"}, {"snd_1", "support"}, {"snd_2", "plain"}} {
				if err := tx.QueueIMAPAppend(ctx, "t1", q[0], q[1], now); err != nil {
					return err
				}
			}
			return nil
		})
		claim := func(holder string, at time.Time) []core.IMAPAppend {
			t.Helper()
			var got []core.IMAPAppend
			inTx(func(tx core.Tx) (err error) {
				got, err = tx.ClaimIMAPAppends(ctx, holder, at, at.Add(time.Minute), 10)
				return err
			})
			return got
		}
		if due, err := s.IMAPAppendsDue(ctx, now); err != nil || !due {
			t.Fatalf("IMAPAppendsDue = %v, %v; want true", due, err)
		}
		got := claim("a", now)
		if len(got) != 1 || got[0].SendID != "snd_1" || got[0].MailboxID != "support" || got[0].Attempts != 1 {
			t.Fatalf("claimed %+v, want snd_1 once", got)
		}
		if due, err := s.IMAPAppendsDue(ctx, now); err != nil || due {
			t.Fatalf("IMAPAppendsDue of a claimed append = %v, %v; want false", due, err)
		}
		if again := claim("b", now); len(again) != 0 {
			t.Fatalf("a leased append was claimed again: %+v", again)
		}
		inTx(func(tx core.Tx) error { return tx.RetryIMAPAppend(ctx, "snd_1", "a", now.Add(time.Second)) })
		if got := claim("b", now.Add(2*time.Second)); len(got) != 1 || got[0].Attempts != 2 {
			t.Fatalf("a retried append: %+v", got)
		}
		inTx(func(tx core.Tx) error { return tx.FinishIMAPAppend(ctx, "snd_1", "b") })
		if got := claim("c", now.Add(time.Hour)); len(got) != 0 {
			t.Fatalf("a finished append was claimed: %+v", got)
		}
	})
}
