package sqlstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// addressSends are sends whose recipients differ in case, display name
// and field: each is found by its bare, lower-case address.
func addressSends() []*core.Send {
	mk := func(i int, to, cc, bcc []string) *core.Send {
		s := newSend(fmt.Sprintf("snd_%02d", i), core.StatusSent, at(i))
		s.To, s.Cc, s.Bcc = to, cc, bcc
		return s
	}
	return []*core.Send{
		mk(0, []string{"ada@example.com"}, nil, nil),
		mk(1, []string{`"Ada L" <Ada@Example.COM>`}, []string{"ada@example.com"}, nil), // twice: one row
		mk(2, []string{"bob@example.com"}, nil, []string{"ada@example.com"}),
		mk(3, []string{"bob@example.com"}, []string{`"Ada <x>" <ada@example.com>`}, nil),
		mk(4, []string{"bob@example.com"}, nil, nil),
	}
}

func listByRecipient(t *testing.T, s *sqlstore.Store, f core.SendFilter) []string {
	t.Helper()
	var ids []string
	for range 10 {
		page, next, err := s.ListSends(context.Background(), "t", f)
		if err != nil {
			t.Fatalf("list by recipient %q: %v", f.Recipient, err)
		}
		for _, p := range page {
			ids = append(ids, p.ID)
		}
		if next == "" {
			return ids
		}
		f.After = next
	}
	t.Fatalf("list by recipient %q: more than 10 pages", f.Recipient)
	return nil
}

// GET /v1/sends?recipient= finds every send with the address in to, cc or
// bcc, whatever its case or display name, once each, newest first, across
// pages; not another tenant's; combined with another filter; and a purge
// takes the purged sends' index rows with them.
func TestSends_ListByRecipientAndPurge(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			for _, snd := range addressSends() {
				if err := tx.InsertSend(ctx, snd); err != nil {
					return err
				}
			}
			other := newSend("snd_other", core.StatusSent, at(0))
			other.Tenant, other.To = "other", []string{"ada@example.com"}
			return tx.InsertSend(ctx, other)
		})
		if got, want := listByRecipient(t, s, core.SendFilter{Recipient: "ada@example.com", Limit: 2}), []string{"snd_03", "snd_02", "snd_01", "snd_00"}; !slices.Equal(got, want) {
			t.Errorf("sends to ada: %v, want %v", got, want)
		}
		if got, want := listByRecipient(t, s, core.SendFilter{Recipient: "bob@example.com", Limit: 10, After: "snd_04"}), []string{"snd_03", "snd_02"}; !slices.Equal(got, want) {
			t.Errorf("sends to bob after snd_04: %v, want %v", got, want)
		}
		if got := listByRecipient(t, s, core.SendFilter{Recipient: "ada@example.com", Status: core.StatusQueued, Limit: 10}); len(got) != 0 {
			t.Errorf("queued sends to ada: %v, want none", got)
		}
		if got := listByRecipient(t, s, core.SendFilter{Recipient: "nobody@example.com", Limit: 10}); len(got) != 0 {
			t.Errorf("sends to nobody: %v, want none", got)
		}
		if n := queryInt(t, s, "SELECT count(*) FROM send_addresses WHERE send_id = ?", "snd_01"); n != 1 {
			t.Errorf("snd_01 has %d index rows, want 1 (one per distinct address)", n)
		}

		if _, err := s.PurgeSends(ctx, at(2)); err != nil { // snd_00 and snd_01
			t.Fatal(err)
		}
		if n := queryInt(t, s, "SELECT count(*) FROM send_addresses WHERE send_id IN (?, ?)", "snd_00", "snd_01"); n != 0 {
			t.Errorf("%d index rows of purged sends left", n)
		}
		if got, want := listByRecipient(t, s, core.SendFilter{Recipient: "ada@example.com", Limit: 10}), []string{"snd_03", "snd_02"}; !slices.Equal(got, want) {
			t.Errorf("sends to ada after the purge: %v, want %v", got, want)
		}
	})
}

// Sends accepted before migration 0015 are indexed by it: the migration is
// undone (table dropped, record deleted) and the store opened again.
func TestMigration0015_BackfillsTheRecipientIndex(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		addr := b.newDB(t)
		s := b.openStore(t, addr)
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			for _, snd := range addressSends() {
				if err := tx.InsertSend(ctx, snd); err != nil {
					return err
				}
			}
			return nil
		})
		want := queryInt(t, s, "SELECT count(*) FROM send_addresses")
		for _, q := range []string{"DROP TABLE send_addresses", "DELETE FROM sendonce_migrations WHERE version = '0015_send_addresses.sql'"} {
			if _, err := s.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()

		s = b.openStore(t, addr)
		if got := queryInt(t, s, "SELECT count(*) FROM send_addresses"); got != want || want != 7 {
			t.Errorf("backfilled %d index rows, want %d as written at acceptance (7)", got, want)
		}
		if got, want := listByRecipient(t, s, core.SendFilter{Recipient: "ada@example.com", Limit: 10}), []string{"snd_03", "snd_02", "snd_01", "snd_00"}; !slices.Equal(got, want) {
			t.Errorf("sends to ada after the backfill: %v, want %v", got, want)
		}
	})
}
