package app

import (
	"context"

	"github.com/sendonce/sendonce/internal/core"
)

// The changes below each own their transaction, for a door that stores no
// answer beside them (the dashboard's forms). The API and SMTP doors store
// their idempotent answer in the change's transaction, so they call the
// forms that take a core.Tx (PutTemplate, Approve, Reject, Cancel,
// Reconcile, AddManualSuppression); these wrap exactly those
// (SaveTemplate, beside PutTemplate, is the other).

// ApproveSend is Approve in its own transaction.
func (s *Service) ApproveSend(ctx context.Context, tenant, id string) (*core.Send, error) {
	return s.sendTx(ctx, func(tx core.Tx) (*core.Send, error) { return s.Approve(ctx, tx, tenant, id) })
}

// RejectSend is Reject in its own transaction.
func (s *Service) RejectSend(ctx context.Context, tenant, id string) (*core.Send, error) {
	return s.sendTx(ctx, func(tx core.Tx) (*core.Send, error) { return s.Reject(ctx, tx, tenant, id) })
}

// CancelSend is Cancel in its own transaction.
func (s *Service) CancelSend(ctx context.Context, key *core.APIKey, id string) (*core.Send, error) {
	return s.sendTx(ctx, func(tx core.Tx) (*core.Send, error) { return s.Cancel(ctx, tx, key, id) })
}

// ReconcileSend is Reconcile in its own transaction.
func (s *Service) ReconcileSend(ctx context.Context, tenant, id, outcome string) (*core.Send, error) {
	return s.sendTx(ctx, func(tx core.Tx) (*core.Send, error) { return s.Reconcile(ctx, tx, tenant, id, outcome) })
}

func (s *Service) sendTx(ctx context.Context, fn func(core.Tx) (*core.Send, error)) (send *core.Send, err error) {
	err = s.store.InTx(ctx, func(tx core.Tx) error {
		send, err = fn(tx)
		return err
	})
	return send, err
}

// SuppressAddress is AddManualSuppression in its own transaction.
func (s *Service) SuppressAddress(ctx context.Context, tenant, email, reason string) (sup *core.Suppression, created bool, err error) {
	err = s.store.InTx(ctx, func(tx core.Tx) error {
		sup, created, err = s.AddManualSuppression(ctx, tx, tenant, email, reason)
		return err
	})
	return sup, created, err
}
