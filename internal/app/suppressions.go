package app

import (
	"context"
	"net/mail"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
)

// maxSuppressionReason bounds a manual entry's reason.
const maxSuppressionReason = 500

// SuppressionAddress checks an address given for the suppression list and
// returns its bare, normalized form. A display name is allowed and dropped.
func SuppressionAddress(param, email string) (string, error) {
	if strings.ContainsAny(email, "\r\n") {
		return "", core.Errorf(core.CodeValidation, param, "an address may not contain CR or LF")
	}
	a, err := mail.ParseAddress(email)
	if err != nil || !strings.Contains(a.Address, "@") {
		return "", core.Errorf(core.CodeValidation, param, "%q is not an email address", email)
	}
	return core.NormalizeAddress(a.Address), nil
}

// AddManualSuppression puts an address on the tenant's suppression list by
// hand (POST /v1/suppressions, Resend's /suppressions). An address already
// on it keeps its entry; created reports which.
func (s *Service) AddManualSuppression(ctx context.Context, tx core.Tx, tenant, email, reason string) (*core.Suppression, bool, error) {
	addr, err := SuppressionAddress("email", email)
	if err != nil {
		return nil, false, err
	}
	if len(reason) > maxSuppressionReason || strings.ContainsAny(reason, "\r\n") {
		return nil, false, core.Errorf(core.CodeValidation, "reason", "reason: at most %d characters, one line", maxSuppressionReason)
	}
	if reason == "" {
		reason = "added by hand"
	}
	sup := &core.Suppression{ID: NewID("sup_"), Tenant: tenant, Address: addr, Reason: reason,
		Origin: core.SuppressionManual, CreatedAt: s.Now()}
	created, err := tx.AddSuppression(ctx, sup)
	if err != nil {
		return nil, false, err
	}
	// Only entries made by hand count against the cap: one a bounce or a
	// complaint adds must never be refused, or the address is mailed again.
	if created {
		if err := s.CheckCap(ctx, tx, core.ResourceSuppressions, tenant); err != nil {
			return nil, false, err
		}
	}
	return sup, created, nil
}

// RemoveSuppression takes the tenant's entry for an address or an id off
// the list and returns it; core.ErrNotFound when there was none.
func (s *Service) RemoveSuppression(ctx context.Context, tenant, emailOrID string) (*core.Suppression, error) {
	var sup *core.Suppression
	err := s.store.InTx(ctx, func(tx core.Tx) error {
		var err error
		sup, err = s.RemoveSuppressionTx(ctx, tx, tenant, emailOrID)
		return err
	})
	return sup, err
}

// RemoveSuppressionTx is RemoveSuppression in the caller's transaction (a
// batch removal, all or nothing, with its stored answer).
func (s *Service) RemoveSuppressionTx(ctx context.Context, tx core.Tx, tenant, emailOrID string) (*core.Suppression, error) {
	return tx.DeleteSuppression(ctx, tenant, emailOrID)
}
