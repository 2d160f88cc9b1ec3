package sqlstore_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// ClaimDue gives each send the lease core.Lease.For gives its files,
// submitted message and forward: the statement computes it as Go does,
// and ExpiredAttempts goes by each send's own lease.
func TestClaimDue_LeaseGrowsWithTheSendsBytes(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		const mib = 1 << 20
		sizes := map[string]int64{"snd_a": 0, "snd_b": 3 * mib, "snd_c": mib + 4096, "snd_d": 1536 << 10}
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			for id := range sizes {
				snd := newSend(id, core.StatusQueued, at(0))
				switch id {
				case "snd_b":
					snd.Attachments = []core.Attachment{{Filename: "a.bin", ContentType: "application/octet-stream", Data: bytes.Repeat([]byte("a"), 2*mib)},
						{Filename: "b.bin", ContentType: "application/octet-stream", Data: bytes.Repeat([]byte("b"), mib)}}
				case "snd_c":
					snd.Raw = bytes.Repeat([]byte("r"), mib+4096)
				case "snd_d":
					snd.Forward = bytes.Repeat([]byte("f"), 512<<10)
					snd.Attachments = []core.Attachment{{Filename: "c.bin", ContentType: "application/octet-stream", Data: bytes.Repeat([]byte("c"), mib)}}
				}
				if err := tx.InsertSend(ctx, snd); err != nil {
					return err
				}
			}
			return nil
		})
		lease := core.Lease{Base: 30 * time.Second, PerMiB: 2 * time.Second, MaxGrowth: 10 * time.Minute}
		now := at(10)
		var claimed []*core.Send
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			var err error
			claimed, err = tx.ClaimDue(ctx, core.ClaimParams{Now: now, Lease: lease, Token: "tok", Limit: 10})
			return err
		})
		if len(claimed) != len(sizes) {
			t.Fatalf("claimed %d sends, want %d", len(claimed), len(sizes))
		}
		for _, c := range claimed {
			want := now.Add(lease.For(sizes[c.ID]))
			if c.LeaseUntil == nil || c.LeaseUntil.Sub(want).Abs() > 2*time.Microsecond {
				t.Errorf("%s (%d bytes): lease until %v, want %v", c.ID, sizes[c.ID], c.LeaseUntil, want)
			}
		}
		// Past the base lease, before the grown ones: only the small send's
		// attempt has expired.
		var expired []*core.Send
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			var err error
			expired, err = tx.ExpiredAttempts(ctx, now.Add(lease.Base+time.Second), 10)
			return err
		})
		if len(expired) != 1 || expired[0].ID != "snd_a" {
			t.Errorf("expired after %v: %d sends, want snd_a alone", lease.Base+time.Second, len(expired))
		}
	})
}
