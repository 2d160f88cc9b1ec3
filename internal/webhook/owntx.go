package webhook

import (
	"context"

	"github.com/sendonce/sendonce/internal/core"
)

// Rotate and Replay are the webhook changes each in a transaction of its
// own, for a door that stores no answer beside them (the dashboard). The
// API stores its idempotent answer in the change's transaction, so it uses
// the Tx forms instead. A new webhook is made by Prepare and stored by
// app.Service.AddWebhook (or CreateWebhook), which checks the tenant's cap.

// Rotate is RotateTx in its own transaction.
func (s *Service) Rotate(ctx context.Context, tenant, id string) (h *core.Webhook, secret string, err error) {
	err = s.store.InTx(ctx, func(tx core.Tx) error {
		h, secret, err = s.RotateTx(ctx, tx, tenant, id)
		return err
	})
	return h, secret, err
}

// Replay is ReplayTx in its own transaction.
func (s *Service) Replay(ctx context.Context, tenant, webhookID, eventID string) error {
	return s.store.InTx(ctx, func(tx core.Tx) error { return s.ReplayTx(ctx, tx, tenant, webhookID, eventID) })
}
