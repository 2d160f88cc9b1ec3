package webhook

import (
	"context"

	"github.com/sendonce/sendonce/internal/core"
)

// Create, Rotate and Replay are the webhook changes each in a transaction
// of its own, for a door that stores no answer beside them (the
// dashboard). The API stores its idempotent answer in the change's
// transaction, so it uses Prepare and the Tx forms instead.

// Create checks the endpoint (outbound policy and DNS, outside any
// transaction) and stores a new webhook; it returns it with its signing
// secret, which is shown once.
func (s *Service) Create(ctx context.Context, tenant, endpoint string, events []string) (*core.Webhook, string, error) {
	hook, secret, err := s.Prepare(ctx, tenant, endpoint, events)
	if err != nil {
		return nil, "", err
	}
	if err := s.store.InTx(ctx, func(tx core.Tx) error { return tx.InsertWebhook(ctx, hook) }); err != nil {
		return nil, "", err
	}
	return hook, secret, nil
}

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
