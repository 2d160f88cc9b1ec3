package app

import (
	"context"
	"fmt"

	"github.com/sendonce/sendonce/internal/core"
)

// A send's status moved by a person: approved, rejected, reconciled.

// Approve moves a pending send to queued and enqueues its delivery.
func (s *Service) Approve(ctx context.Context, tx core.Tx, tenant, id string) (*core.Send, error) {
	return s.transition(ctx, tx, tenant, id, core.StatusPendingApproval, core.StatusQueued, core.EventApproved, "approved")
}

// Reject cancels a pending send.
func (s *Service) Reject(ctx context.Context, tx core.Tx, tenant, id string) (*core.Send, error) {
	return s.transition(ctx, tx, tenant, id, core.StatusPendingApproval, core.StatusCanceled, core.EventCanceled, "rejected")
}

// Reconcile outcomes.
const (
	OutcomeSent   = "sent"
	OutcomeFailed = "failed"
	OutcomeResend = "resend"
)

// Reconcile is the only way out of unknown: a person (or a system that
// checked the recipient's side) says what happened.
func (s *Service) Reconcile(ctx context.Context, tx core.Tx, tenant, id, outcome string) (*core.Send, error) {
	var (
		send *core.Send
		err  error
		to   core.Status // what the recipients left unknown become
	)
	switch outcome {
	case OutcomeSent:
		send, err = s.transition(ctx, tx, tenant, id, core.StatusUnknown, core.StatusSent, core.EventSent, "reconciled")
		to = core.StatusSent
	case OutcomeFailed:
		send, err = s.transition(ctx, tx, tenant, id, core.StatusUnknown, core.StatusFailed, core.EventFailed, "reconciled")
		to = core.StatusFailed
	case OutcomeResend:
		// Only the recipients left unknown get it again (per-destination
		// delivery records each recipient's own outcome).
		send, err = s.transition(ctx, tx, tenant, id, core.StatusUnknown, core.StatusQueued, core.EventReconciled, "reconciled")
		to = core.StatusQueued
	default:
		return nil, core.Errorf(core.CodeValidation, "outcome", "outcome must be sent, failed or resend")
	}
	if err != nil {
		return nil, err
	}
	states, err := tx.Recipients(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, r := range states {
		if r.Status == core.StatusUnknown {
			r.Status, r.Detail, r.UpdatedAt = to, "reconciled: "+outcome, s.Now()
			if err := tx.SetRecipient(ctx, id, r); err != nil {
				return nil, err
			}
		}
	}
	return send, nil
}

// transition moves a send from one status to another, recording event
// (one of core's Event… names: a change the contract names is its
// webhook event, so a reconciled sent is EventSent) with a detail like
// "reconciled: unknown -> sent". Into queued it is due at once, with a
// fresh retry budget.
func (s *Service) transition(ctx context.Context, tx core.Tx, tenant, id string, from, to core.Status, event, why string) (*core.Send, error) {
	send, err := tx.SendForUpdateIn(ctx, id, from)
	if err != nil {
		return nil, err
	}
	if send.Tenant != tenant {
		return nil, core.ErrNotFound
	}
	if send.Status != from {
		return nil, core.Errorf(core.CodeInvalidState, "", "send %s is %s, not %s", id, send.Status, from)
	}
	now := s.Now()
	send.Status, send.UpdatedAt = to, now
	// A decided attempt no longer holds the send: a late finisher of the old
	// attempt must not overwrite this decision.
	send.AttemptToken, send.LeaseUntil, send.NextAttemptAt = "", nil, nil
	if to == core.StatusQueued {
		send.Tries = 0
		if send.ScheduledAt != nil && send.ScheduledAt.After(now) {
			// Approved before its time: it waits for it.
			send.Status, send.NextAttemptAt = core.StatusScheduled, send.ScheduledAt
		}
	}
	if to == core.StatusSent && send.SentAt == nil {
		send.SentAt = &now
	}
	if err := tx.UpdateSend(ctx, send); err != nil {
		return nil, err
	}
	if err := tx.AddEvent(ctx, id, core.Event{Type: event, At: now, Detail: fmt.Sprintf("%s: %s -> %s", why, from, to)}); err != nil {
		return nil, err
	}
	return send, nil
}
