package sqlstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// TestSendByProviderMessage_FindsEveryCopy: a send that goes out as one
// copy per recipient keeps one provider record (the latest id) and every
// copy's id; each id finds the send, with its record, once however often
// it is added; another provider's id of the same text finds nothing.
func TestSendByProviderMessage_FindsEveryCopy(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *sqlstore.Store) {
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			if err := tx.InsertSend(ctx, newSend("snd_copies", core.StatusSending, at(0))); err != nil {
				return err
			}
			for _, id := range []string{"re-1", "re-2", "re-2"} {
				if err := tx.AddProviderCopy(ctx, "snd_copies", "resend", id); err != nil {
					return err
				}
			}
			return tx.SetSendProvider(ctx, &core.SendProvider{SendID: "snd_copies", Tenant: "t", Transport: "resend://api.resend.com",
				Provider: "resend", MessageID: "re-2", Since: at(1), UpdatedAt: at(1)})
		})
		inTx(t, s, func(ctx context.Context, tx core.Tx) error {
			for _, id := range []string{"re-1", "re-2"} {
				send, prov, err := tx.SendByProviderMessage(ctx, "resend", id)
				if err != nil || send.ID != "snd_copies" || prov.MessageID != "re-2" {
					t.Errorf("SendByProviderMessage(%s) = %v, %+v, %v; want snd_copies and its record", id, send, prov, err)
				}
			}
			if _, _, err := tx.SendByProviderMessage(ctx, "ses", "re-1"); !errors.Is(err, core.ErrNotFound) {
				t.Errorf("another provider's id: %v, want ErrNotFound", err)
			}
			return nil
		})
	})
}
