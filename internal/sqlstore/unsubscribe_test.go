package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// TestSuppressions_StreamScopeAndWidening: an entry for the bulk stream
// holds back bulk mail only; an entry for every stream added over it
// (a bounce after an unsubscribe) widens it, and one for a single stream
// added over an entry for every stream changes nothing.
func TestSuppressions_StreamScopeAndWidening(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		add := func(addr, origin string, stream core.Stream) bool {
			t.Helper()
			var created bool
			err := s.InTx(ctx, func(tx core.Tx) error {
				var err error
				created, err = tx.AddSuppression(ctx, &core.Suppression{ID: "sup_" + origin + addr, Tenant: "t", Address: addr,
					Reason: origin, Origin: origin, Stream: stream, CreatedAt: time.Unix(1, 0)})
				return err
			})
			if err != nil {
				t.Fatalf("add suppression: %v", err)
			}
			return created
		}
		scope := func(addr string) (bulk, transactional bool) {
			t.Helper()
			b, err1 := s.SuppressedFor(ctx, "t", addr, core.StreamBulk)
			tr, err2 := s.SuppressedFor(ctx, "t", addr, core.StreamTransactional)
			if err1 != nil || err2 != nil {
				t.Fatalf("SuppressedFor: %v %v", err1, err2)
			}
			return b, tr
		}
		if !add("u@example.com", core.SuppressionUnsubscribe, core.StreamBulk) {
			t.Fatal("the unsubscribe entry was not created")
		}
		if b, tr := scope("u@example.com"); !b || tr {
			t.Fatalf("after an unsubscribe: bulk %v, transactional %v; want true, false", b, tr)
		}
		if add("u@example.com", core.SuppressionUnsubscribe, core.StreamBulk) {
			t.Error("a second unsubscribe entry reported created")
		}
		if !add("u@example.com", core.SuppressionBounce, "") {
			t.Error("a bounce over an unsubscribe did not widen the entry")
		}
		if b, tr := scope("u@example.com"); !b || !tr {
			t.Fatalf("after a bounce: bulk %v, transactional %v; want both", b, tr)
		}
		if sup, err := s.Suppression(ctx, "t", "u@example.com"); err != nil || sup.Origin != core.SuppressionBounce || sup.Stream != "" {
			t.Fatalf("widened entry = %+v, %v; want origin bounce for every stream", sup, err)
		}
		add("m@example.com", core.SuppressionManual, "")
		if add("m@example.com", core.SuppressionUnsubscribe, core.StreamBulk) {
			t.Error("an unsubscribe over a manual entry reported created")
		}
		if b, tr := scope("m@example.com"); !b || !tr {
			t.Fatalf("manual entry after an unsubscribe: bulk %v, transactional %v; want both", b, tr)
		}
	})
}
