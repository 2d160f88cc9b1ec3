package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// TestQuarantine_StoreReadsAndMoves: a quarantined message is left out of
// the default list and alone in the quarantine's, its sender is not a
// known correspondent until it is released (a second release moves
// nothing), and a delete takes the message and its bytes from the
// tenant's usage.
func TestQuarantine_StoreReadsAndMoves(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		at := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
		m := &core.ReceivedMessage{ID: "rcv_q1", Tenant: "t", MailboxID: "inb_1", DedupKey: "d1", Digest: "g1",
			Source: "smtp", From: "Eve <eve@forged.test>", Sender: "eve@forged.test", Subject: "Wire", Size: 10,
			Folder: core.FolderQuarantine, ReceivedAt: at}
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			_, _, _, err := tx.InsertReceived(ctx, m, []byte("0123456789"))
			return err
		})
		if ms, _, err := s.ListReceived(ctx, "t", core.ReceivedFilter{Limit: 10}); err != nil || len(ms) != 0 {
			t.Fatalf("default list: %d %v, want none", len(ms), err)
		}
		ms, _, err := s.ListReceived(ctx, "t", core.ReceivedFilter{Folder: core.FolderQuarantine, Limit: 10})
		if err != nil || len(ms) != 1 || ms[0].Folder != core.FolderQuarantine || ms[0].Sender != "eve@forged.test" {
			t.Fatalf("quarantine list: %+v %v", ms, err)
		}
		if known, err := s.KnownCorrespondent(ctx, "t", "eve@forged.test"); err != nil || known {
			t.Fatalf("a quarantined sender is known: %v %v", known, err)
		}
		for i, want := range []bool{true, false} {
			inTx(t, s, func(ctx context.Context, tx core.Tx) error {
				moved, err := tx.ReleaseReceived(ctx, "t", "rcv_q1")
				if err == nil && moved != want {
					t.Errorf("release %d moved %v, want %v", i, moved, want)
				}
				return err
			})
		}
		if known, err := s.KnownCorrespondent(ctx, "t", "eve@forged.test"); err != nil || !known {
			t.Fatalf("a released sender is not known: %v %v", known, err)
		}
		if got, err := s.ReceivedMessage(ctx, "t", "rcv_q1"); err != nil || got.Folder != core.FolderInbox {
			t.Fatalf("after release: %+v %v", got, err)
		}
		inTx(t, s, func(ctx context.Context, tx core.Tx) error { return tx.DeleteReceived(ctx, "t", "rcv_q1") })
		if n, bytes, err := s.ReceivedUsage(ctx, "t"); err != nil || n != 0 || bytes != 0 {
			t.Fatalf("usage after delete: %d %d %v", n, bytes, err)
		}
		if _, err := s.ReceivedRaw(ctx, "t", "rcv_q1"); err != core.ErrNotFound {
			t.Fatalf("raw after delete: %v", err)
		}
	})
}
