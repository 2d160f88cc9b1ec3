package sqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// A tenant's transactional send is claimed before its bulk backlog, older
// as the backlog is: alone in the queue (one tenant) and beside another
// tenant's backlog (the fair claim). The stream is stored and read back.
func TestClaimDue_TransactionalBeforeBulk(t *testing.T) {
	forOneAndTwoTenants(t, func(t *testing.T, s *sqlstore.Store, tenants int) {
		const backlog = 300
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			if err := queueTenantSends(ctx, tx, tenants, backlog, func(tn, i int) (string, core.Stream) {
				return fmt.Sprintf("snd_bulk_%d_%03d", tn, i), core.StreamBulk
			}); err != nil {
				return err
			}
			reset := newSend("snd_reset", core.StatusQueued, at(backlog+1)) // the newest of all
			reset.Tenant = "t0"
			return tx.InsertSend(ctx, reset)
		})
		var claimed []*core.Send
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			var err error
			claimed, err = tx.ClaimDue(ctx, core.ClaimParams{Now: at(backlog + 10), Lease: core.Lease{Base: time.Minute}, Token: "tok", Limit: 4})
			return err
		})
		if len(claimed) != 4 {
			t.Fatalf("claimed %d sends, want 4", len(claimed))
		}
		found := false
		for _, c := range claimed {
			if c.ID == "snd_reset" {
				found = true
				if c.Stream != core.StreamTransactional {
					t.Errorf("the reset reads back as stream %q", c.Stream)
				}
			} else if c.Stream != core.StreamBulk {
				t.Errorf("%s reads back as stream %q, want bulk", c.ID, c.Stream)
			}
		}
		if !found {
			ids := make([]string, len(claimed))
			for i, c := range claimed {
				ids[i] = c.ID
			}
			t.Errorf("claimed %v: the transactional send waits behind the bulk backlog", ids)
		}
	})
}

// forOneAndTwoTenants runs fn per store with one tenant's sends alone in
// the queue and beside another tenant's (the fair claim).
func forOneAndTwoTenants(t *testing.T, fn func(t *testing.T, s *sqlstore.Store, tenants int)) {
	t.Helper()
	for _, tenants := range []int{1, 2} {
		t.Run(fmt.Sprintf("tenants=%d", tenants), func(t *testing.T) {
			forEachStore(t, func(t *testing.T, s *sqlstore.Store) { fn(t, s, tenants) })
		})
	}
}

// queueTenantSends inserts n queued sends for each of tenants t0, t1, …
// (tenants of them), the i-th created at(i); fn names each one's id and
// stream.
func queueTenantSends(ctx context.Context, tx core.Tx, tenants, n int, fn func(tn, i int) (id string, stream core.Stream)) error {
	for tn := range tenants {
		for i := range n {
			id, stream := fn(tn, i)
			snd := newSend(id, core.StatusQueued, at(i))
			snd.Tenant, snd.Stream = fmt.Sprintf("t%d", tn), stream
			if err := tx.InsertSend(ctx, snd); err != nil {
				return err
			}
		}
	}
	return nil
}
