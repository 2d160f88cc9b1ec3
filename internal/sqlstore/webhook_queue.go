package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/sendonce/sendonce/internal/core"
)

// OnWebhookDue has fn called after every commit that queued a webhook
// delivery, so that this process's webhook worker looks at once. Call it
// once, before the store is used.
func (s *Store) OnWebhookDue(fn func()) { s.onWebhookDue = fn }

func anyWebhookEvent(events []core.Event) bool {
	for _, e := range events {
		if _, ok := core.WebhookType(e.Type); ok {
			return true
		}
	}
	return false
}

// queueSelect is the SELECT that makes the deliveries of the events e: one
// per enabled endpoint of the send's tenant subscribed to the event's
// name (a disabled endpoint has no subscription rows). A tenant without
// endpoints costs it one empty primary-key range lookup per event.
//
// Its one parameter is the send's id. The tenant is an uncorrelated
// sub-select on purpose: joined to sends, PostgreSQL's generic plan (it
// cannot estimate the rows of e) scanned the whole sends table.
const queueSelect = `SELECT ws.webhook_id, e.uid, ws.tenant, e.send_id, e.type, 'pending', 0, e.at, e.at, e.at
		FROM e JOIN webhook_subscriptions ws ON ws.event = e.type
		WHERE ws.tenant = (SELECT tenant FROM sends WHERE id = ?)`

const queueInsert = `INSERT INTO webhook_deliveries
		(webhook_id, event_id, tenant, send_id, event, status, tries, next_attempt_at, created_at, updated_at) `

// addEventsQueued is PostgreSQL's AddEvent when a webhook event is among
// the events: the events' INSERT and their deliveries' INSERT … SELECT in
// one statement (a data-modifying WITH), so that queueing costs no round
// trip of its own.
func (t *Tx) addEventsQueued(ctx context.Context, sendID, insertEvents string, args []any) error {
	return t.queueExec(ctx, "add event", `WITH e AS (`+insertEvents+` RETURNING send_id, type, uid, at) `+queueInsert+queueSelect,
		append(args, sendID)...)
}

// queueExec runs a statement that queues webhook deliveries (what names it
// in its error); one that queued any marks the transaction hooked, so that
// its commit wakes the webhook worker.
func (t *Tx) queueExec(ctx context.Context, what, query string, args ...any) error {
	n, err := t.q.exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n > 0 {
		t.hooked = true
	}
	return nil
}

// queueWebhooks queues, in the events' own transaction, one delivery of
// each webhook event to every endpoint that wants it (queueSelect over the
// rows just written), run only when one of the events is a webhook event
// at all. SQLite has no data-modifying WITH, and its statements cost no
// round trip: a statement of its own.
func (t *Tx) queueWebhooks(ctx context.Context, sendID string, events []core.Event) error {
	args := []any{sendID}
	for _, e := range events {
		if _, ok := core.WebhookType(e.Type); ok {
			args = append(args, e.ID)
		}
	}
	if len(args) == 1 {
		return nil
	}
	return t.queueExec(ctx, "queue webhook deliveries", `WITH e AS (SELECT send_id, type, uid, at FROM send_events
		WHERE send_id = ? AND uid IN (?`+strings.Repeat(", ?", len(args)-2)+`)) `+queueInsert+queueSelect, append(args, sendID)...)
}

// claimDue takes the due deliveries of enabled endpoints, at most
// perEndpoint running per endpoint and perTenant per tenant (counting
// those already running): the inner window numbers each endpoint's due
// rows, the outer one each tenant's rows left by the endpoint bound. So
// one tenant's slow endpoints, however many, hold at most perTenant
// attempts, and the rest of the workers stay free for the others. The
// rows are taken tenant by tenant (each tenant's first, then each one's
// second, a tenant with attempts running counted as that far along),
// oldest first within a round: a claim is shared between the tenants
// with work due. PostgreSQL allows no FOR UPDATE with a window; two
// claimers that pick the same row are kept apart by the status =
// 'pending' the UPDATE checks again once the first commits.
const claimDue = `UPDATE webhook_deliveries SET status = 'attempting', lease_token = ?, lease_until = ?,
	tries = tries + 1, next_attempt_at = NULL, updated_at = ?
	WHERE status = 'pending' AND (webhook_id, event_id) IN (
		SELECT e.webhook_id, e.event_id FROM (
			SELECT c.webhook_id, c.event_id, c.tenant, c.next_attempt_at,
				ROW_NUMBER() OVER (PARTITION BY c.tenant ORDER BY c.next_attempt_at, c.event_id) AS tn
			FROM (
				SELECT d.webhook_id, d.event_id, d.tenant, d.next_attempt_at,
					ROW_NUMBER() OVER (PARTITION BY d.webhook_id ORDER BY d.next_attempt_at, d.event_id) AS rn
				FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id AND w.status = 'enabled'
				WHERE d.status = 'pending' AND d.next_attempt_at <= ?
			) c
			LEFT JOIN (SELECT webhook_id, count(*) AS n FROM webhook_deliveries
				WHERE status = 'attempting' GROUP BY webhook_id) f ON f.webhook_id = c.webhook_id
			WHERE c.rn + COALESCE(f.n, 0) <= ?
		) e
		LEFT JOIN (SELECT tenant, count(*) AS n FROM webhook_deliveries
			WHERE status = 'attempting' GROUP BY tenant) g ON g.tenant = e.tenant
		WHERE e.tn + COALESCE(g.n, 0) <= ?
		ORDER BY e.tn + COALESCE(g.n, 0), e.next_attempt_at LIMIT ?)
	RETURNING ` + deliveryColumns

// perTenant is the claim's per-tenant bound; none (as many as Limit)
// when it has none.
func perTenant(c core.WebhookClaim) int {
	if c.PerTenant <= 0 {
		return 1 << 30 // no bound
	}
	return c.PerTenant
}

// ClaimWebhooks implements core.WebhookQueue.
func (s *Store) ClaimWebhooks(ctx context.Context, c core.WebhookClaim) ([]*core.WebhookJob, error) {
	var jobs []*core.WebhookJob
	err := s.InTx(ctx, func(tx core.Tx) error {
		t := tx.(*Tx)
		jobs = nil
		// An attempt whose worker died is tried again: at least once.
		if _, err := t.q.exec(ctx, `UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = ?,
			lease_token = '', lease_until = NULL WHERE status = 'attempting' AND lease_until < ?`,
			micros(c.Now), micros(c.Now)); err != nil {
			return fmt.Errorf("put back expired webhook attempts: %w", err)
		}
		rs, err := t.q.query(ctx, claimDue, c.Token, micros(c.LeaseUntil), micros(c.Now), micros(c.Now), c.PerEndpoint, perTenant(c), c.Limit)
		if err != nil {
			return fmt.Errorf("claim webhook deliveries: %w", err)
		}
		ds, err := collectDeliveries(rs)
		if err != nil {
			return err
		}
		endpoints := map[string]*core.WebhookJob{}
		for _, d := range ds {
			if d.Body == nil {
				if d.Body, err = t.buildBody(ctx, d, c); err != nil {
					return err
				}
				if d.Body == nil {
					continue // its send is gone: failed, nothing to send
				}
			}
			ep, ok := endpoints[d.WebhookID]
			if !ok {
				ep = &core.WebhookJob{}
				if err := t.q.queryRow(ctx, `SELECT endpoint, secret FROM webhooks WHERE id = ?`, d.WebhookID).Scan(&ep.Endpoint, &ep.Secret); err != nil {
					return fmt.Errorf("read webhook %s: %w", d.WebhookID, err)
				}
				endpoints[d.WebhookID] = ep
			}
			jobs = append(jobs, &core.WebhookJob{Delivery: d, Endpoint: ep.Endpoint, Secret: ep.Secret})
		}
		if c.TraceParents {
			return t.traceParents(ctx, jobs)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

// traceParents fills the claimed deliveries' TraceParent from their
// sends, in one statement.
func (t *Tx) traceParents(ctx context.Context, jobs []*core.WebhookJob) error {
	if len(jobs) == 0 {
		return nil
	}
	args := make([]any, 0, len(jobs))
	for _, j := range jobs {
		args = append(args, j.Delivery.SendID)
	}
	rs, err := t.q.query(ctx, `SELECT id, trace_parent FROM sends WHERE trace_parent IS NOT NULL AND id IN (?`+
		strings.Repeat(", ?", len(args)-1)+`)`, args...)
	if err != nil {
		return fmt.Errorf("read the trace parents of webhook deliveries: %w", err)
	}
	defer rs.Close()
	parents := map[string]string{}
	for rs.Next() {
		var id, tp string
		if err := rs.Scan(&id, &tp); err != nil {
			return fmt.Errorf("read the trace parents of webhook deliveries: %w", err)
		}
		parents[id] = tp
	}
	if err := rs.Err(); err != nil {
		return fmt.Errorf("read the trace parents of webhook deliveries: %w", err)
	}
	for _, j := range jobs {
		j.Delivery.TraceParent = parents[j.Delivery.SendID]
	}
	return nil
}

// buildBody makes and keeps a delivery's body at its first claim. A send
// purged since (with its events) leaves nothing to tell: the delivery is
// failed and nil returned.
func (t *Tx) buildBody(ctx context.Context, d *core.WebhookDelivery, c core.WebhookClaim) ([]byte, error) {
	send, err := scanSend(t.q.queryRow(ctx, `SELECT `+sendColumns+` FROM sends WHERE id = ?`, d.SendID))
	var ev core.Event
	if err == nil {
		var (
			at     int64
			bounce string
		)
		err = t.q.queryRow(ctx, `SELECT type, at, detail, uid, recipient, bounce FROM send_events WHERE send_id = ? AND uid = ?`,
			d.SendID, d.EventID).Scan(&ev.Type, &at, &ev.Detail, &ev.ID, &ev.Recipient, &bounce)
		if errors.Is(err, sql.ErrNoRows) {
			err = core.ErrNotFound
		}
		ev.At = fromMicros(at)
		if err == nil {
			ev.Bounce, err = decodeBounce(bounce)
		}
	}
	if errors.Is(err, core.ErrNotFound) {
		_, err := t.q.exec(ctx, `UPDATE webhook_deliveries SET status = 'failed', lease_token = '', lease_until = NULL
			WHERE webhook_id = ? AND event_id = ?`, d.WebhookID, d.EventID)
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("read the event of webhook delivery %s: %w", d.EventID, err)
	}
	typ, _ := core.WebhookType(ev.Type)
	body, err := c.Build(send, ev, typ)
	if err != nil {
		return nil, fmt.Errorf("build webhook body: %w", err)
	}
	if _, err := t.q.exec(ctx, `UPDATE webhook_deliveries SET body = ? WHERE webhook_id = ? AND event_id = ?`,
		body, d.WebhookID, d.EventID); err != nil {
		return nil, fmt.Errorf("keep webhook body: %w", err)
	}
	return body, nil
}

// maxResponseKept bounds the start of a response body kept per attempt
// (webhook.MaxResponse).
const maxResponseKept = 256

// RecordWebhookAttempt implements core.WebhookQueue.
func (s *Store) RecordWebhookAttempt(ctx context.Context, r core.WebhookResult) error {
	d := r.Job.Delivery
	a := r.Attempt
	if a.ID == "" {
		a.ID = "wha_" + strings.ToLower(ulid.MustNew(ulid.Timestamp(a.At), ulid.DefaultEntropy()).String())
	}
	if len(a.Response) > maxResponseKept {
		a.Response = a.Response[:maxResponseKept]
	}
	status, next := core.DeliverySuccess, (*time.Time)(nil)
	switch {
	case r.Success:
	case r.NextAttemptAt != nil && r.Disable == "":
		status, next = core.DeliveryPending, r.NextAttemptAt
	default:
		status = core.DeliveryFailed
	}
	return s.InTx(ctx, func(tx core.Tx) error {
		t := tx.(*Tx)
		if _, err := t.q.exec(ctx, `INSERT INTO webhook_attempts (id, webhook_id, event_id, at, http_status, response, error, duration_us)
			SELECT ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM webhook_deliveries WHERE webhook_id = ? AND event_id = ?)`,
			a.ID, d.WebhookID, d.EventID, micros(a.At), a.HTTPStatus, a.Response, a.Error, a.Duration.Microseconds(),
			d.WebhookID, d.EventID); err != nil {
			return fmt.Errorf("record webhook attempt: %w", err)
		}
		n, err := t.q.exec(ctx, `UPDATE webhook_deliveries SET status = ?, next_attempt_at = ?, lease_token = '',
			lease_until = NULL, updated_at = ? WHERE webhook_id = ? AND event_id = ? AND lease_token = ? AND status = 'attempting'`,
			status, nullMicros(next), micros(r.Now), d.WebhookID, d.EventID, d.LeaseToken)
		if err != nil {
			return fmt.Errorf("record webhook delivery: %w", err)
		}
		if n == 0 {
			return nil // the claim no longer holds it (deleted, or put back and claimed again)
		}
		return t.countDelivery(ctx, d.WebhookID, status, r)
	})
}

// countDelivery keeps the endpoint's run of failed deliveries and disables
// it on a 410 or when the run reaches MaxFailures.
func (t *Tx) countDelivery(ctx context.Context, webhookID string, status core.DeliveryStatus, r core.WebhookResult) error {
	switch status {
	case core.DeliverySuccess:
		_, err := t.q.exec(ctx, `UPDATE webhooks SET failures = 0 WHERE id = ? AND failures <> 0`, webhookID)
		return err
	case core.DeliveryPending:
		return nil
	}
	var failures int
	if err := t.q.queryRow(ctx, `UPDATE webhooks SET failures = failures + 1 WHERE id = ? RETURNING failures`, webhookID).Scan(&failures); err != nil {
		return fmt.Errorf("count failed webhook delivery: %w", err)
	}
	reason := r.Disable
	if reason == "" && r.MaxFailures > 0 && failures >= r.MaxFailures {
		reason = fmt.Sprintf("%d deliveries in a row failed", failures)
	}
	if reason == "" {
		return nil
	}
	n, err := t.q.exec(ctx, `UPDATE webhooks SET status = 'disabled', disabled_reason = ?, updated_at = ?
		WHERE id = ? AND status = 'enabled'`, reason, micros(r.Now), webhookID)
	if err != nil {
		return fmt.Errorf("disable webhook: %w", err)
	}
	if n == 1 {
		if _, err := t.q.exec(ctx, `DELETE FROM webhook_subscriptions WHERE webhook_id = ?`, webhookID); err != nil {
			return fmt.Errorf("disable webhook: %w", err)
		}
	}
	return nil
}
