package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// TestDrafts_VersionedUpdatesAndSentOnce: a draft changes only against the
// version read, is marked sent once, a sent draft no longer changes, and
// any draft can be deleted; lists are the tenant's (and the mailboxes') own, newest first.
func TestDrafts_VersionedUpdatesAndSentOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.openStore(t, b.newDB(t))
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Microsecond)
		mk := func(tenant, id, mailbox string) *core.Draft {
			return &core.Draft{Tenant: tenant, ID: id, MailboxID: mailbox, Content: []byte(`{"subject":"a"}`), Version: 1,
				IdempotencyKey: "draft:" + id, CreatedAt: now, UpdatedAt: now}
		}
		a, b2, other := mk("t", "drf_1", "default"), mk("t", "drf_2", "inb_x"), mk("u", "drf_3", "default")
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			for _, d := range []*core.Draft{a, b2, other} {
				if err := tx.InsertDraft(ctx, d); err != nil {
					return err
				}
			}
			return nil
		})
		try := func(fn func(tx core.Tx) (bool, error)) (ok bool) {
			t.Helper()
			inTx(t, s, func(_ context.Context, tx core.Tx) (err error) { ok, err = fn(tx); return err })
			return ok
		}
		next := *a
		next.Content, next.Version = []byte(`{"subject":"b"}`), 2
		if !try(func(tx core.Tx) (bool, error) { return tx.UpdateDraft(ctx, &next, 1) }) {
			t.Fatal("an update against the version read failed")
		}
		if try(func(tx core.Tx) (bool, error) { return tx.UpdateDraft(ctx, &next, 1) }) {
			t.Error("an update against an old version succeeded")
		}
		if try(func(tx core.Tx) (bool, error) { return tx.MarkDraftSent(ctx, "t", "drf_1", 1, "snd_x", now) }) {
			t.Error("a send of an old version was recorded")
		}
		if !try(func(tx core.Tx) (bool, error) { return tx.MarkDraftSent(ctx, "t", "drf_1", 2, "snd_1", now) }) {
			t.Fatal("the send was not recorded")
		}
		if try(func(tx core.Tx) (bool, error) { return tx.MarkDraftSent(ctx, "t", "drf_1", 2, "snd_2", now) }) {
			t.Error("a second send was recorded")
		}
		next.Version = 3
		if try(func(tx core.Tx) (bool, error) { return tx.UpdateDraft(ctx, &next, 2) }) {
			t.Error("a sent draft was updated")
		}
		got, err := s.Draft(ctx, "t", "drf_1")
		if err != nil || got.SendID != "snd_1" || got.Version != 2 || string(got.Content) != `{"subject":"b"}` || got.SentAt == nil {
			t.Errorf("the sent draft: %+v (%v)", got, err)
		}
		if _, err := s.Draft(ctx, "u", "drf_1"); err != core.ErrNotFound {
			t.Errorf("another tenant's read: %v, want ErrNotFound", err)
		}
		all, _ := s.ListDrafts(ctx, "t", core.DraftFilter{Limit: 10})
		inbox, _ := s.ListDrafts(ctx, "t", core.DraftFilter{Limit: 10, MailboxIDs: []string{"inb_x"}})
		after, _ := s.ListDrafts(ctx, "t", core.DraftFilter{Limit: 10, After: "drf_2"})
		if len(all) != 2 || all[0].ID != "drf_2" || len(inbox) != 1 || inbox[0].ID != "drf_2" || len(after) != 1 || after[0].ID != "drf_1" {
			t.Errorf("lists: all %d, inbox %d, after %d", len(all), len(inbox), len(after))
		}
		for _, id := range []string{"drf_1", "drf_2"} { // sent or not
			if !try(func(tx core.Tx) (bool, error) { return tx.DeleteDraft(ctx, "t", id) }) {
				t.Errorf("draft %s was not deleted", id)
			}
		}
		if try(func(tx core.Tx) (bool, error) { return tx.DeleteDraft(ctx, "u", "drf_1") }) {
			t.Error("a deleted draft was deleted again")
		}
	})
}

// TestDrafts_SentOnesGoWithTheirSend: the retention purge deletes a sent
// draft once its send is purged (it holds the same message); a draft
// whose send is kept (unknown: it needs attention), and a draft never
// sent, stay however old.
func TestDrafts_SentOnesGoWithTheirSend(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			for _, snd := range []*core.Send{newSend("snd_done", core.StatusSent, at(0)), newSend("snd_unknown", core.StatusUnknown, at(0))} {
				if err := tx.InsertSend(ctx, snd); err != nil {
					return err
				}
			}
			for id, sendID := range map[string]string{"drf_done": "snd_done", "drf_unknown": "snd_unknown", "drf_unsent": ""} {
				d := &core.Draft{Tenant: "t", ID: id, MailboxID: "default", Content: []byte(`{"subject":"a"}`), Version: 1,
					IdempotencyKey: "draft:" + id, CreatedAt: at(0), UpdatedAt: at(0)}
				if err := tx.InsertDraft(ctx, d); err != nil {
					return err
				}
				if sendID == "" {
					continue
				}
				if ok, err := tx.MarkDraftSent(ctx, "t", id, 1, sendID, at(1)); err != nil || !ok {
					return fmt.Errorf("mark %s sent: %v %v", id, ok, err)
				}
			}
			return nil
		})
		if _, err := s.PurgeSends(ctx, at(10)); err != nil {
			t.Fatal(err)
		}
		for id, kept := range map[string]bool{"drf_done": false, "drf_unknown": true, "drf_unsent": true} {
			_, err := s.Draft(ctx, "t", id)
			if gone := errors.Is(err, core.ErrNotFound); gone == kept || (err != nil && !gone) {
				t.Errorf("%s after the purge: %v, want kept %v", id, err, kept)
			}
		}
	})
}
