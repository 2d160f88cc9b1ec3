package app

import (
	"context"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// MaxScheduleAhead is how far ahead scheduled_at may be (docs/api.md,
// "Scheduled sends").
const MaxScheduleAhead = 30 * 24 * time.Hour

// ParseSchedule reads a scheduled_at: RFC 3339 with an offset, after now
// and at most MaxScheduleAhead later.
func ParseSchedule(param, v string, now time.Time) (time.Time, error) {
	at, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, core.Errorf(core.CodeValidation, param, "scheduled_at must be an RFC 3339 time with an offset, e.g. 2026-01-02T15:04:05Z")
	}
	if !at.After(now) {
		return time.Time{}, core.Errorf(core.CodeValidation, param, "scheduled_at is not in the future")
	}
	if at.After(now.Add(MaxScheduleAhead)) {
		return time.Time{}, core.Errorf(core.CodeValidation, param, "scheduled_at is more than 30 days ahead")
	}
	return at.UTC(), nil
}

// Cancel turns a send that has not been attempted — scheduled,
// pending_approval, or queued and never claimed — into canceled; it is
// never delivered. The row is locked while it is read, so a claim that
// races it either comes first (and this answers invalid_state) or finds
// the send canceled. key changes only what it could have sent
// (mayChange).
func (s *Service) Cancel(ctx context.Context, tx core.Tx, key *core.APIKey, id string) (*core.Send, error) {
	send, err := tx.SendForUpdateIn(ctx, id, core.StatusScheduled, core.StatusPendingApproval, core.StatusQueued)
	if err != nil {
		return nil, err
	}
	if err := mayChange(ctx, tx, key, send); err != nil {
		return nil, err
	}
	switch {
	case send.Status == core.StatusScheduled, send.Status == core.StatusPendingApproval,
		send.Status == core.StatusQueued && send.Tries == 0 && send.Attempts == 0:
	default:
		return nil, core.Errorf(core.CodeInvalidState, "", "send %s is %s: only a scheduled, pending or not yet attempted send can be canceled", id, send.Status)
	}
	now := s.Now()
	from := send.Status
	send.Status, send.UpdatedAt, send.NextAttemptAt = core.StatusCanceled, now, nil
	if err := tx.UpdateSend(ctx, send); err != nil {
		return nil, err
	}
	if err := tx.AddEvent(ctx, id, core.Event{Type: core.EventCanceled, At: now, Detail: string(from) + " -> canceled"}); err != nil {
		return nil, err
	}
	return send, nil
}

// Reschedule moves a scheduled send to a new time.
func (s *Service) Reschedule(ctx context.Context, tx core.Tx, key *core.APIKey, id, scheduledAt string) (*core.Send, error) {
	now := s.Now()
	at, err := ParseSchedule("scheduled_at", scheduledAt, now)
	if err != nil {
		return nil, err
	}
	send, err := tx.SendForUpdateIn(ctx, id, core.StatusScheduled)
	if err != nil {
		return nil, err
	}
	if err := mayChange(ctx, tx, key, send); err != nil {
		return nil, err
	}
	if send.Status != core.StatusScheduled {
		return nil, core.Errorf(core.CodeInvalidState, "", "send %s is %s: only a scheduled send can be moved", id, send.Status)
	}
	if err := tx.Reschedule(ctx, id, at, now); err != nil {
		return nil, err
	}
	if err := tx.AddEvent(ctx, id, core.Event{Type: core.EventScheduled, At: now, Detail: at.Format(time.RFC3339)}); err != nil {
		return nil, err
	}
	send.ScheduledAt, send.NextAttemptAt, send.UpdatedAt = &at, &at, now
	return send, nil
}

// mayChange applies the sending rules to a change of a send already made:
// another tenant's send does not exist for key, and a key limited to
// mailboxes changes only the sends of those, as it sends only from them.
// (Without it a mailbox-limited agent key canceled or moved a send of a
// mailbox it could not have sent from.) An agent key changes only the
// sends it made, as it lists only those.
func mayChange(ctx context.Context, tx core.Tx, key *core.APIKey, send *core.Send) error {
	if send.Tenant != key.Tenant {
		return core.ErrNotFound
	}
	if !key.MayUseMailbox(send.MailboxID) {
		return core.Errorf(core.CodeForbidden, "id", "this API key may not change sends of mailbox %q", send.MailboxID)
	}
	if key.Agent {
		owner, err := tx.SendAPIKey(ctx, send.ID)
		if err != nil {
			return err
		}
		if owner != key.ID {
			return core.Errorf(core.CodeForbidden, "id", "an agent key changes only the sends it made")
		}
	}
	return nil
}
