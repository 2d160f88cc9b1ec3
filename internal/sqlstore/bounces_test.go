package sqlstore_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sendonce/sendonce/internal/core"
)

// TestBounceStore: suppressions (added once, found by address in any case
// or by id, listed with a cursor, deleted), recipient states (stored
// per send, read with the send), report digests (recorded once), the
// shared server secret (the first stored wins), and the purge of what
// inbound mail left.
func TestBounceStore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.openStore(t, b.newDB(t))
		inTx := func(fn func(tx core.Tx) error) {
			t.Helper()
			if err := s.InTx(ctx, fn); err != nil {
				t.Fatal(err)
			}
		}
		var created []bool
		inTx(func(tx core.Tx) error {
			created = created[:0]
			for i, a := range []string{"Ann@Example.com", "ann@example.com", "bob@example.com", "cy@example.com"} {
				c, err := tx.AddSuppression(ctx, &core.Suppression{ID: "sup_0" + string(rune('a'+i)), Tenant: "t", Address: a,
					Reason: "r", Origin: core.SuppressionManual, CreatedAt: at(i)})
				if err != nil {
					return err
				}
				created = append(created, c)
			}
			return nil
		})
		if want := []bool{true, false, true, true}; !slices.Equal(created, want) {
			t.Fatalf("created %v, want %v", created, want)
		}
		if sup, err := s.Suppression(ctx, "t", "ANN@example.com"); err != nil || sup.ID != "sup_0a" || sup.Address != "ann@example.com" {
			t.Fatalf("by address: %+v %v", sup, err)
		}
		if sup, err := s.Suppression(ctx, "t", "sup_0c"); err != nil || sup.Address != "bob@example.com" {
			t.Fatalf("by id: %+v %v", sup, err)
		}
		if _, err := s.Suppression(ctx, "other", "ann@example.com"); !errors.Is(err, core.ErrNotFound) {
			t.Fatalf("another tenant's: %v, want not found", err)
		}
		page, next, err := s.ListSuppressions(ctx, "t", core.SuppressionFilter{Limit: 2})
		if err != nil || len(page) != 2 || page[0].ID != "sup_0d" || next != "sup_0c" {
			t.Fatalf("first page %+v next %q %v", page, next, err)
		}
		page, next, err = s.ListSuppressions(ctx, "t", core.SuppressionFilter{Limit: 2, After: next})
		if err != nil || len(page) != 1 || page[0].ID != "sup_0a" || next != "" {
			t.Fatalf("second page %+v next %q %v", page, next, err)
		}
		if ok, err := s.IsSuppressed(ctx, "t", "BOB@example.com"); err != nil || !ok {
			t.Fatalf("IsSuppressed(bob) = %v %v", ok, err)
		}
		inTx(func(tx core.Tx) error {
			sup, err := tx.DeleteSuppression(ctx, "t", "bob@example.com")
			if err != nil || sup.ID != "sup_0c" {
				t.Errorf("delete: %+v %v", sup, err)
			}
			if _, err := tx.DeleteSuppression(ctx, "t", "bob@example.com"); !errors.Is(err, core.ErrNotFound) {
				t.Errorf("delete again: %v, want not found", err)
			}
			return nil
		})

		// Recipient states and report digests.
		send := newSend("snd_01", core.StatusSent, at(1))
		inTx(func(tx core.Tx) error { return tx.InsertSend(ctx, send) })
		var first []bool
		inTx(func(tx core.Tx) error {
			first = first[:0]
			if err := tx.SetRecipient(ctx, send.ID, core.RecipientState{Address: "Ann@example.com", Status: core.RecipientDelayed, UpdatedAt: at(2)}); err != nil {
				return err
			}
			if err := tx.SetRecipient(ctx, send.ID, core.RecipientState{Address: "ann@example.com", Status: core.StatusBounced, Detail: "5.1.1", UpdatedAt: at(3)}); err != nil {
				return err
			}
			for range 2 {
				f, err := tx.RecordReport(ctx, core.ReportParams{Digest: "digest-1", Tenant: "t", SendID: send.ID, At: at(3)})
				if err != nil {
					return err
				}
				first = append(first, f)
			}
			return nil
		})
		if !slices.Equal(first, []bool{true, false}) {
			t.Errorf("RecordReport twice: %v, want first then not", first)
		}
		got, _, err := s.SendWithEvents(ctx, "t", send.ID)
		if err != nil || len(got.Recipients) != 1 || got.Recipients[0].Status != core.StatusBounced || got.Recipients[0].Detail != "5.1.1" {
			t.Fatalf("recipients with the send: %+v %v", got, err)
		}
		if l, _, err := s.ListSends(ctx, "t", core.SendFilter{Limit: 10}); err != nil || len(l) != 1 || len(l[0].Recipients) != 1 {
			t.Fatalf("recipients in the list: %+v %v", l, err)
		}

		var k1, k2 []byte
		inTx(func(tx core.Tx) error { k1, err = tx.ServerSecret(ctx, "verp", []byte("first")); return err })
		inTx(func(tx core.Tx) error { k2, err = tx.ServerSecret(ctx, "verp", []byte("second")); return err })
		if !bytes.Equal(k1, []byte("first")) || !bytes.Equal(k2, k1) {
			t.Fatalf("server secret %q then %q, want the first both times", k1, k2)
		}

		inTx(func(tx core.Tx) error {
			return tx.InsertUnmatched(ctx, &core.UnmatchedInbound{ID: "inb_01", Tenant: "t", SendID: send.ID, Reason: "x", Raw: []byte("raw"), ReceivedAt: at(3)})
		})
		if l, err := s.ListUnmatched(ctx, "t", 10); err != nil || len(l) != 1 || l[0].Size != 3 || l[0].Raw != nil { // sizes listed, bytes not read
			t.Fatalf("unmatched: %+v %v", l, err)
		}
		if _, err := s.PurgeSends(ctx, at(10)); err != nil {
			t.Fatal(err)
		}
		for _, table := range []string{"send_recipients", "inbound_reports", "inbound_unmatched"} {
			if n := queryInt(t, s, "SELECT count(*) FROM "+table); n != 0 {
				t.Errorf("after the purge %s has %d rows, want 0", table, n)
			}
		}
	})
}
