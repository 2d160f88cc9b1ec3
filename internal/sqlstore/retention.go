package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// PurgeAudit implements core.Store. Entry ids are ULIDs, which sort by the
// time they were made, so the purge is a range of the primary key and
// needs no index on the time column; "at" guards against ids minted by a
// clock that ran ahead.
func (s *Store) PurgeAudit(ctx context.Context, before time.Time) (int, error) {
	var u ulid.ULID
	if err := u.SetTime(ulid.Timestamp(before)); err != nil {
		return 0, fmt.Errorf("purge audit: cutoff %v: %w", before, err)
	}
	cutoff := "aud_" + strings.ToLower(u.String())
	n, err := s.w.exec(ctx, `DELETE FROM audit_log WHERE id < ? AND at < ?`, cutoff, micros(before))
	if err != nil {
		return 0, fmt.Errorf("purge audit: %w", err)
	}
	return int(n), nil
}

// finishedStatuses are those PurgeSends may delete.
const finishedStatuses = `('sent', 'failed', 'canceled', 'delivered', 'bounced', 'complained', 'suppressed')`

// PurgeSends implements core.Store. Sends that still need attention
// (queued, sending, pending_approval, unknown) are kept however old.
func (s *Store) PurgeSends(ctx context.Context, before time.Time) (int, error) {
	cutoff := micros(before)
	// One pass over the recipient index (it has no foreign key: see
	// migration 0015).
	if _, err := s.w.exec(ctx, `DELETE FROM send_addresses WHERE send_id IN (SELECT id FROM sends
		WHERE created_at < ? AND status IN `+finishedStatuses+`)`, cutoff); err != nil {
		return 0, fmt.Errorf("purge the recipient index: %w", err)
	}
	if _, err := s.w.exec(ctx, `DELETE FROM inbox_messages WHERE send_id IN (SELECT id FROM sends
		WHERE created_at < ? AND status IN `+finishedStatuses+`)`, cutoff); err != nil {
		return 0, fmt.Errorf("purge captured messages: %w", err)
	}
	n, err := s.w.exec(ctx, `DELETE FROM sends WHERE created_at < ? AND status IN `+finishedStatuses, cutoff)
	if err != nil {
		return 0, fmt.Errorf("purge sends: %w", err)
	}
	if err := s.purgeInbound(ctx, cutoff); err != nil {
		return 0, err
	}
	if err := s.purgeSentDrafts(ctx, cutoff); err != nil {
		return 0, err
	}
	if err := s.purgeWebhookDeliveries(ctx, before); err != nil {
		return 0, err
	}
	return int(n), nil
}

// purgeSentDrafts deletes the drafts sent before the cutoff whose send is
// gone: a sent draft holds the message the send held, and keeping it would
// outlive the send's retention. A draft whose send is kept (one that still
// needs attention) stays with it.
func (s *Store) purgeSentDrafts(ctx context.Context, cutoff int64) error {
	if _, err := s.w.exec(ctx, `DELETE FROM drafts WHERE sent_at IS NOT NULL AND sent_at < ?
		AND NOT EXISTS (SELECT 1 FROM sends WHERE sends.tenant = drafts.tenant AND sends.id = drafts.send_id)`, cutoff); err != nil {
		return fmt.Errorf("purge sent drafts: %w", err)
	}
	return nil
}

// purgeWebhookDeliveries deletes the finished deliveries (and, by their
// foreign key, their attempts) of events made before the cutoff; pending
// ones are kept, as sends that still need attention are. Event ids are
// ULIDs of the event's time, so "made before" is a range on the key's
// second column, walked per endpoint.
func (s *Store) purgeWebhookDeliveries(ctx context.Context, before time.Time) error {
	var floor ulid.ULID
	if err := floor.SetTime(ulid.Timestamp(before)); err != nil {
		return fmt.Errorf("purge webhook deliveries: %w", err)
	}
	if _, err := s.w.exec(ctx, `DELETE FROM webhook_deliveries WHERE webhook_id IN (SELECT id FROM webhooks)
		AND event_id < ? AND status IN ('success', 'failed')`, "evt_"+strings.ToLower(floor.String())); err != nil {
		return fmt.Errorf("purge webhook deliveries: %w", err)
	}
	return nil
}
