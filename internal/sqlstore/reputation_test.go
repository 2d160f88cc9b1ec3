package sqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// The reputation guard's rows: a paused tenant's bulk sends are left out
// of the claim (alone in the queue and beside another tenant's, the fair
// claim) while its transactional ones and the other tenant's bulk ones
// are claimed; a stream changes state once from each state; an outcome
// counts once; the counts and the hourly series read back what was
// stored.
func TestReputation_ClaimSkipsPausedBulk(t *testing.T) {
	forOneAndTwoTenants(t, func(t *testing.T, s *sqlstore.Store, tenants int) {
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			streams := []core.Stream{core.StreamBulk, core.StreamTransactional}
			if err := queueTenantSends(ctx, tx, tenants, len(streams), func(tn, i int) (string, core.Stream) {
				return fmt.Sprintf("snd_%d_%s", tn, streams[i]), streams[i]
			}); err != nil {
				return err
			}
			if _, err := tx.LockStream(ctx, "t0", core.StreamBulk, at(5)); err != nil {
				return err
			}
			changed, err := tx.SetStreamState(ctx, "t0", core.StreamBulk, core.StreamPaused, at(5))
			if err != nil || !changed {
				return fmt.Errorf("pause: %v %v, want changed", changed, err)
			}
			return nil
		})
		claimed := map[string]bool{}
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			got, err := tx.ClaimDue(ctx, core.ClaimParams{Now: at(10), Lease: core.Lease{Base: time.Minute}, Token: "tok", Limit: 10})
			for _, c := range got {
				claimed[c.ID] = true
			}
			return err
		})
		want := map[string]bool{"snd_0_transactional": true}
		if tenants == 2 {
			want["snd_1_transactional"], want["snd_1_bulk"] = true, true
		}
		if len(claimed) != len(want) || claimed["snd_0_bulk"] {
			t.Fatalf("claimed %v, want %v (the paused bulk send left queued)", claimed, want)
		}
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			if changed, err := tx.SetStreamState(ctx, "t0", core.StreamBulk, core.StreamPaused, at(11)); err != nil || changed {
				return fmt.Errorf("pause a paused stream: %v %v, want unchanged", changed, err)
			}
			if changed, err := tx.SetStreamState(ctx, "t0", core.StreamBulk, core.StreamActive, at(12)); err != nil || !changed {
				return fmt.Errorf("resume: %v %v, want changed", changed, err)
			}
			return nil
		})
		st, err := s.StreamState(context.Background(), "t0", core.StreamBulk)
		if err != nil || st.State != core.StreamActive || !st.JudgeFrom.Equal(at(12)) {
			t.Fatalf("after the resume: %+v %v, want active, judged from the resume", st, err)
		}
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			got, err := tx.ClaimDue(ctx, core.ClaimParams{Now: at(13), Lease: core.Lease{Base: time.Minute}, Token: "tok2", Limit: 10})
			if err == nil && (len(got) != 1 || got[0].ID != "snd_0_bulk") {
				err = fmt.Errorf("after the resume the claim took %d sends, want snd_0_bulk", len(got))
			}
			return err
		})
	})
}

func TestReputation_OutcomesCountOnceInTheWindow(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := context.Background()
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			for i := range 4 {
				snd := newSend(fmt.Sprintf("snd_%d", i), core.StatusSent, at(i*3600))
				snd.Stream, snd.SentAt = core.StreamBulk, new(at(i*3600+1))
				if i == 3 {
					snd.Stream = core.StreamTransactional // not counted
				}
				if err := tx.InsertSend(ctx, snd); err != nil {
					return err
				}
			}
			for i, o := range []struct {
				send, kind string
				first      bool
				at         int
			}{{"snd_0", core.OutcomeComplaint, true, 2}, {"snd_0", core.OutcomeComplaint, false, 3}, {"snd_0", core.OutcomeBounce, true, 4}, {"snd_2", core.OutcomeBounce, true, 2*3600 + 2}} {
				first, err := tx.RecordStreamOutcome(ctx, core.StreamOutcome{Tenant: "t", Stream: core.StreamBulk, SendID: o.send,
					Recipient: "ann@example.com", Kind: o.kind, At: at(o.at)})
				if err != nil || first != o.first {
					return fmt.Errorf("outcome %d: first %v %v, want %v", i, first, err, o.first)
				}
			}
			return nil
		})
		c, err := s.StreamCounts(ctx, core.StreamWindowParams{Tenant: "t", Stream: core.StreamBulk, Since: at(0)})
		if err != nil || c != (core.StreamCounts{Sends: 3, Complaints: 1, Bounces: 2}) {
			t.Errorf("counts %+v %v, want 3 sends, 1 complaint, 2 bounces", c, err)
		}
		if c, _ := s.StreamCounts(ctx, core.StreamWindowParams{Tenant: "t", Stream: core.StreamBulk, Since: at(3600)}); c.Sends != 2 || c.Complaints != 0 {
			t.Errorf("counts since the second hour %+v, want 2 sends and no complaint", c)
		}
		series, err := s.StreamSeries(ctx, core.StreamWindowParams{Tenant: "t", Stream: core.StreamBulk, Since: at(0)}, time.Hour)
		if err != nil || len(series) != 3 {
			t.Fatalf("series %+v %v, want 3 hourly buckets", series, err)
		}
		if series[0].StreamCounts != (core.StreamCounts{Sends: 1, Complaints: 1, Bounces: 1}) || !series[0].Start.Equal(at(0)) ||
			series[2].StreamCounts != (core.StreamCounts{Sends: 1, Bounces: 1}) {
			t.Errorf("series %+v", series)
		}
	})
}
