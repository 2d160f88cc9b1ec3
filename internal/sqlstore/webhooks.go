package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// Webhooks (docs/webhooks.md): the endpoints, the subscriptions
// AddEvent joins, and the reads of deliveries and attempts. The queue side
// (queueing, claiming, recording) is in webhook_queue.go.

const webhookColumns = `id, tenant, endpoint, events, status, secret, failures, disabled_reason, created_at, updated_at`

func scanWebhook(r rowScanner) (*core.Webhook, error) {
	var (
		w                    core.Webhook
		events               string
		createdAt, updatedAt int64
	)
	err := r.Scan(&w.ID, &w.Tenant, &w.Endpoint, &events, &w.Status, &w.Secret, &w.Failures, &w.DisabledReason, &createdAt, &updatedAt)
	if err := rowErr("scan webhook", err); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(events), &w.Events); err != nil {
		return nil, fmt.Errorf("decode webhook %s events: %w", w.ID, err)
	}
	w.CreatedAt, w.UpdatedAt = fromMicros(createdAt), fromMicros(updatedAt)
	return &w, nil
}

// InsertWebhook implements core.WebhookTx.
func (t *Tx) InsertWebhook(ctx context.Context, w *core.Webhook) error {
	_, err := t.q.exec(ctx, `INSERT INTO webhooks (`+webhookColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.ID, w.Tenant, w.Endpoint, jsonText(nonNil(w.Events)), w.Status, w.Secret, w.Failures, w.DisabledReason,
		micros(w.CreatedAt), micros(w.UpdatedAt))
	if err != nil {
		return fmt.Errorf("insert webhook: %w", err)
	}
	return t.subscribe(ctx, w)
}

// subscribe writes the webhook's subscription rows: one per history event
// name while it is enabled, none while it is disabled.
func (t *Tx) subscribe(ctx context.Context, w *core.Webhook) error {
	if _, err := t.q.exec(ctx, `DELETE FROM webhook_subscriptions WHERE webhook_id = ?`, w.ID); err != nil {
		return fmt.Errorf("clear webhook subscriptions: %w", err)
	}
	if w.Status != core.WebhookEnabled {
		return nil
	}
	for _, typ := range w.Events {
		ev, ok := core.EventOfWebhookType(typ)
		if !ok {
			return core.Errorf(core.CodeValidation, "events", "%q is not an event type", typ)
		}
		if _, err := t.q.exec(ctx, `INSERT INTO webhook_subscriptions (tenant, event, webhook_id) VALUES (?, ?, ?)
			ON CONFLICT DO NOTHING`, w.Tenant, ev, w.ID); err != nil {
			return fmt.Errorf("subscribe webhook: %w", err)
		}
	}
	return nil
}

// UpdateWebhook implements core.WebhookTx.
func (t *Tx) UpdateWebhook(ctx context.Context, w *core.Webhook) error {
	err := t.execOne(ctx, "update webhook", `UPDATE webhooks SET endpoint = ?, events = ?, status = ?, secret = ?, failures = ?,
		disabled_reason = ?, updated_at = ? WHERE id = ? AND tenant = ?`,
		w.Endpoint, jsonText(nonNil(w.Events)), w.Status, w.Secret, w.Failures, w.DisabledReason, micros(w.UpdatedAt), w.ID, w.Tenant)
	if err != nil {
		return err
	}
	return t.subscribe(ctx, w)
}

// WebhookForUpdate implements core.WebhookTx.
func (t *Tx) WebhookForUpdate(ctx context.Context, tenant, id string) (*core.Webhook, error) {
	return scanWebhook(t.q.queryRow(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = ? AND tenant = ?`+t.s.forUpdate, id, tenant))
}

// DeleteWebhook implements core.WebhookTx: its subscriptions, deliveries
// and attempts go with it.
func (t *Tx) DeleteWebhook(ctx context.Context, tenant, id string) error {
	return t.execOne(ctx, "delete webhook", `DELETE FROM webhooks WHERE id = ? AND tenant = ?`, id, tenant)
}

// ReplayWebhookDelivery implements core.WebhookTx.
func (t *Tx) ReplayWebhookDelivery(ctx context.Context, ref core.WebhookDeliveryRef, now time.Time) error {
	tenant, webhookID, eventID := ref.Tenant, ref.WebhookID, ref.EventID
	var status core.DeliveryStatus
	err := t.q.queryRow(ctx, `SELECT status FROM webhook_deliveries WHERE webhook_id = ? AND event_id = ? AND tenant = ?`+t.s.forUpdate,
		webhookID, eventID, tenant).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return core.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("read webhook delivery: %w", err)
	}
	if status == core.DeliveryAttempting {
		return core.Errorf(core.CodeInvalidState, "", "an attempt of this delivery is running; replay it once it ended")
	}
	if _, err := t.q.exec(ctx, `UPDATE webhook_deliveries SET status = 'pending', tries = 0, next_attempt_at = ?,
		lease_token = '', lease_until = NULL, updated_at = ? WHERE webhook_id = ? AND event_id = ?`,
		micros(now), micros(now), webhookID, eventID); err != nil {
		return fmt.Errorf("replay webhook delivery: %w", err)
	}
	t.hooked = true
	return nil
}

// Webhook implements core.WebhookStore.
func (s *Store) Webhook(ctx context.Context, tenant, id string) (*core.Webhook, error) {
	return scanWebhook(s.r.queryRow(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = ? AND tenant = ?`, id, tenant))
}

// pageLimit is a page's size: 20 unless asked, at most 100.
func pageLimit(p core.WebhookPage) int {
	if p.Limit <= 0 {
		return 20
	}
	return min(p.Limit, 100)
}

// ListWebhooks implements core.WebhookStore.
func (s *Store) ListWebhooks(ctx context.Context, tenant string, p core.WebhookPage) ([]*core.Webhook, bool, error) {
	limit := pageLimit(p)
	q, args := `SELECT `+webhookColumns+` FROM webhooks WHERE tenant = ?`, []any{tenant}
	if p.After != "" {
		q, args = q+` AND id < ?`, append(args, p.After)
	}
	return listPage(ctx, s.r, "list webhooks", scanWebhook, nil, limit, q+` ORDER BY id DESC LIMIT ?`, args...)
}

const deliveryColumns = `webhook_id, event_id, tenant, send_id, event, status, tries, next_attempt_at, lease_token, body, created_at, updated_at`

func scanDelivery(r rowScanner) (*core.WebhookDelivery, error) {
	var (
		d                    core.WebhookDelivery
		next                 sql.NullInt64
		createdAt, updatedAt int64
	)
	err := r.Scan(&d.WebhookID, &d.EventID, &d.Tenant, &d.SendID, &d.Event, &d.Status, &d.Tries, &next, &d.LeaseToken,
		&d.Body, &createdAt, &updatedAt)
	if err := rowErr("scan webhook delivery", err); err != nil {
		return nil, err
	}
	d.NextAttemptAt = fromNullMicros(next)
	d.CreatedAt, d.UpdatedAt = fromMicros(createdAt), fromMicros(updatedAt)
	return &d, nil
}

func collectDeliveries(rs rows) ([]*core.WebhookDelivery, error) {
	return collect(rs, "read webhook deliveries", scanDelivery, nil)
}

// ListWebhookDeliveries implements core.WebhookStore: event ids are
// ordered by time, so newest first is by id.
func (s *Store) ListWebhookDeliveries(ctx context.Context, tenant, webhookID string, p core.WebhookPage) ([]*core.WebhookDelivery, bool, error) {
	if _, err := s.Webhook(ctx, tenant, webhookID); err != nil {
		return nil, false, err
	}
	limit := pageLimit(p)
	q, args := `SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE webhook_id = ? AND tenant = ?`, []any{webhookID, tenant}
	if p.After != "" {
		q, args = q+` AND event_id < ?`, append(args, p.After)
	}
	rs, err := s.r.query(ctx, q+` ORDER BY event_id DESC LIMIT ?`, append(args, limit+1)...)
	if err != nil {
		return nil, false, fmt.Errorf("list webhook deliveries: %w", err)
	}
	out, err := collectDeliveries(rs)
	if err != nil {
		return nil, false, err
	}
	return out[:min(len(out), limit)], len(out) > limit, nil
}

// WebhookDelivery implements core.WebhookStore.
func (s *Store) WebhookDelivery(ctx context.Context, ref core.WebhookDeliveryRef) (*core.WebhookDelivery, error) {
	return scanDelivery(s.r.queryRow(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries
		WHERE webhook_id = ? AND event_id = ? AND tenant = ?`, ref.WebhookID, ref.EventID, ref.Tenant))
}

// ListWebhookAttempts implements core.WebhookStore.
func (s *Store) ListWebhookAttempts(ctx context.Context, ref core.WebhookDeliveryRef, p core.WebhookPage) ([]*core.WebhookAttempt, bool, error) {
	if _, err := s.WebhookDelivery(ctx, ref); err != nil {
		return nil, false, err
	}
	limit := pageLimit(p)
	q, args := `SELECT id, webhook_id, event_id, at, http_status, response, error, duration_us FROM webhook_attempts
		WHERE webhook_id = ? AND event_id = ?`, []any{ref.WebhookID, ref.EventID}
	if p.After != "" {
		q, args = q+` AND id < ?`, append(args, p.After)
	}
	return listPage(ctx, s.r, "list webhook attempts", scanAttempt, nil, limit, q+` ORDER BY id DESC LIMIT ?`, args...)
}

func scanAttempt(r rowScanner) (*core.WebhookAttempt, error) {
	var (
		a      core.WebhookAttempt
		at, us int64
	)
	if err := r.Scan(&a.ID, &a.WebhookID, &a.EventID, &at, &a.HTTPStatus, &a.Response, &a.Error, &us); err != nil {
		return nil, fmt.Errorf("scan webhook attempt: %w", err)
	}
	a.At, a.Duration = fromMicros(at), time.Duration(us)*time.Microsecond
	return &a, nil
}
