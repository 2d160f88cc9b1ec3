package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// ClaimDue implements core.Tx: one statement claims the batch, each send
// with the lease its size gives it (claimLease).
func (t *Tx) ClaimDue(ctx context.Context, p core.ClaimParams) ([]*core.Send, error) {
	now, lease, token, limit := p.Now, p.Lease, p.Token, p.Limit
	// A scheduled send is queued from its time on (docs/api.md,
	// "Scheduled sends"); the partial index makes this a look at an empty range when none
	// is due.
	if _, err := t.q.exec(ctx, `UPDATE sends SET status = 'queued', updated_at = ?
		WHERE status = 'scheduled' AND next_attempt_at <= ?`, micros(now), micros(now)); err != nil {
		return nil, fmt.Errorf("queue scheduled sends: %w", err)
	}
	tenants, err := t.queuedTenants(ctx, maxFairTenants)
	if err != nil {
		return nil, err
	}
	if len(tenants) == 0 {
		return nil, nil // nothing queued: no claim statement to run
	}
	paused, err := t.pausedBulk(ctx)
	if err != nil {
		return nil, err
	}
	if len(tenants) > 1 {
		return t.claimFair(ctx, p, tenants, paused)
	}
	// One tenant (or none): its transactional sends, then its bulk ones,
	// each an index seek on sends_due (stream, next_attempt_at) — never a
	// sort of the queue by priority.
	var out []*core.Send
	for _, stream := range core.Streams {
		left := limit - len(out)
		if left <= 0 {
			break
		}
		if stream == core.StreamBulk && paused[tenants[0]] {
			continue // its backlog is not even scanned
		}
		rows, err := t.q.query(ctx, `UPDATE sends SET status = 'sending', attempt_token = ?, lease_until = `+t.claimLease()+`,
			tries = tries + 1, next_attempt_at = NULL, updated_at = ?
			WHERE id IN (SELECT id FROM sends WHERE status = 'queued' AND stream = ? AND next_attempt_at <= ?`+unpaused(stream)+`
				ORDER BY next_attempt_at LIMIT ?`+t.s.skipLocked+`)
			RETURNING `+sendColumns, token, micros(now.Add(lease.Base)), lease.MaxGrowth.Microseconds(), lease.PerMiB.Microseconds(),
			micros(now), string(stream), micros(now), left)
		if err != nil {
			return nil, fmt.Errorf("claim due %s sends: %w", stream, err)
		}
		got, err := collectSends(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

// pausedBulk lists the tenants whose bulk stream the reputation guard
// paused (a handful of rows): the claim skips their bulk sends without
// scanning them, however long the backlog a paused stream keeps.
func (t *Tx) pausedBulk(ctx context.Context) (map[string]bool, error) {
	return stringSet(ctx, t.q, "read paused streams", `SELECT tenant FROM tenant_streams WHERE stream = 'bulk' AND state = 'paused'`)
}

// unpaused is the claim's condition that leaves out the sends of a
// stream the reputation guard paused (docs/deliverability.md, "The
// reputation guard"): they stay queued and no worker attempts them. The
// claim skips a tenant pausedBulk lists before it looks; this condition
// covers a pause that commits in between (one primary-key probe of
// tenant_streams per candidate row). Only bulk is ever paused.
func unpaused(stream core.Stream) string {
	if stream != core.StreamBulk {
		return ""
	}
	return ` AND NOT EXISTS (SELECT 1 FROM tenant_streams ts WHERE ts.tenant = sends.tenant AND ts.stream = 'bulk' AND ts.state = 'paused')`
}

// maxFairTenants bounds the tenants one claim shares itself between; the
// next claim starts after the last one served (Store.fairAfter).
const maxFairTenants = 64

// queuedTenants lists up to limit tenants with queued sends, from the one
// after the last served, by skipping through sends_due_tenant: one index
// seek per tenant, whatever their backlogs (a loose index scan).
func (t *Tx) queuedTenants(ctx context.Context, limit int) ([]string, error) {
	const step = `SELECT min(tenant) FROM sends WHERE status = 'queued' AND tenant > ?`
	var out []string
	start := t.s.fairCursor()
	after, wrapped := start, false
	for len(out) < limit {
		var tenant sql.NullString
		if err := t.q.queryRow(ctx, step, after).Scan(&tenant); err != nil {
			return nil, fmt.Errorf("queued tenants: %w", err)
		}
		if !tenant.Valid {
			if wrapped || start == "" {
				break
			}
			after, wrapped = "", true // from the first tenant, up to the start
			continue
		}
		if wrapped && tenant.String > start || slices.Contains(out, tenant.String) {
			break
		}
		out = append(out, tenant.String)
		after = tenant.String
	}
	return out, nil
}

// claimFair claims for several tenants at once: each gets an equal share
// of the limit (its due sends, transactional ones first: dueOfTenant),
// and what a tenant leaves unused goes to the others, so one tenant's
// backlog cannot hold every worker while another's mail waits behind it.
func (t *Tx) claimFair(ctx context.Context, p core.ClaimParams, tenants []string, paused map[string]bool) ([]*core.Send, error) {
	now := micros(p.Now)
	var ids []any
	taken := map[string]int{} // per tenant and stream: the rows an earlier round took
	full := slices.Clone(tenants)
	for left := p.Limit; left > 0 && len(full) > 0; {
		share := max(1, left/len(full))
		var next []string
		for _, tenant := range full {
			if left <= 0 {
				break
			}
			n := min(share, left)
			got, err := t.dueOfTenant(ctx, tenant, now, n, taken, paused[tenant], &ids)
			if err != nil {
				return nil, err
			}
			left -= got
			if got == n {
				next = append(next, tenant) // may have more
			}
		}
		full = next
	}
	if len(tenants) > 0 {
		t.s.setFairCursor(tenants[0])
	}
	if len(ids) == 0 {
		return nil, nil
	}
	lease := p.Lease
	args := append([]any{p.Token, micros(p.Now.Add(lease.Base)), lease.MaxGrowth.Microseconds(), lease.PerMiB.Microseconds(), now}, ids...)
	rows, err := t.q.query(ctx, `UPDATE sends SET status = 'sending', attempt_token = ?, lease_until = `+t.claimLease()+`,
		tries = tries + 1, next_attempt_at = NULL, updated_at = ?
		WHERE status = 'queued' AND id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)
		RETURNING `+sendColumns, args...)
	if err != nil {
		return nil, fmt.Errorf("claim due sends: %w", err)
	}
	return collectSends(rows)
}

// dueOfTenant appends up to n of tenant's oldest due sends to ids, its
// transactional ones first, and returns how many. Each stream is one seek
// on sends_due_tenant (tenant, stream, next_attempt_at); taken is what
// earlier rounds of the claim took of each, skipped by OFFSET.
func (t *Tx) dueOfTenant(ctx context.Context, tenant string, now int64, n int, taken map[string]int, bulkPaused bool, ids *[]any) (int, error) {
	got := 0
	for _, stream := range core.Streams {
		if got >= n {
			break
		}
		if stream == core.StreamBulk && bulkPaused {
			continue
		}
		unit := tenant + "\x00" + string(stream)
		rows, err := t.q.query(ctx, `SELECT id FROM sends WHERE status = 'queued' AND tenant = ? AND stream = ? AND next_attempt_at <= ?`+
			unpaused(stream)+` ORDER BY next_attempt_at LIMIT ? OFFSET ?`+t.s.skipLocked, tenant, string(stream), now, n-got, taken[unit])
		if err != nil {
			return 0, fmt.Errorf("claim due sends of %s: %w", tenant, err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return 0, fmt.Errorf("claim due sends: %w", err)
			}
			*ids = append(*ids, id)
			got++
			taken[unit]++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, fmt.Errorf("claim due sends: %w", err)
		}
	}
	return got, nil
}

// claimLease is the lease_until ClaimDue writes, core.Lease.For in SQL:
// the base lease's end, plus PerMiB per MiB of the send's files, submitted
// message and forward, at most MaxGrowth (parameters in that order, in
// microseconds). length() reads a stored value's size, not its bytes (on
// SQLite from the record header, on PostgreSQL from the TOAST pointer);
// only a send with files looks into send_attachments, by its key.
func (t *Tx) claimLease() string {
	least := "min"
	if t.s.dialect == Postgres {
		least = "LEAST"
	}
	return `CAST(? AS BIGINT) + ` + least + `(CAST(? AS BIGINT), (coalesce(length(raw_message), 0) + coalesce(length(forward_raw), 0)
		+ CASE WHEN attachment_count > 0 THEN (SELECT coalesce(sum(length(data)), 0) FROM send_attachments WHERE send_id = sends.id) ELSE 0 END)
		* CAST(? AS BIGINT) / 1048576)`
}

// ExpiredAttempts implements core.Tx.
func (t *Tx) ExpiredAttempts(ctx context.Context, now time.Time, limit int) ([]*core.Send, error) {
	rows, err := t.q.query(ctx, `SELECT `+sendColumns+` FROM sends
		WHERE status = 'sending' AND lease_until < ? ORDER BY lease_until LIMIT ?`+t.s.skipLocked, micros(now), limit)
	if err != nil {
		return nil, fmt.Errorf("expired attempts: %w", err)
	}
	return collectSends(rows)
}

// UpdateAttempt implements core.Tx.
func (t *Tx) UpdateAttempt(ctx context.Context, s *core.Send, token string) (bool, error) {
	n, err := t.q.exec(ctx, `UPDATE sends SET status = ?, attempts = ?, last_error = ?, attempt_token = ?,
		lease_until = ?, updated_at = ?, sent_at = ?, tries = ?, next_attempt_at = ?
		WHERE id = ? AND attempt_token = ? AND status = 'sending'`,
		s.Status, s.Attempts, nullString(s.LastError), nullString(s.AttemptToken), nullMicros(s.LeaseUntil),
		micros(s.UpdatedAt), nullMicros(s.SentAt), s.Tries, t.due(s), s.ID, token)
	if err != nil {
		return false, fmt.Errorf("record attempt: %w", err)
	}
	return n == 1, nil
}

// QueueDepth implements core.Store.
func (s *Store) QueueDepth(ctx context.Context) (int, error) {
	return queryCount(ctx, s.r, "queue depth", `SELECT count(*) FROM sends WHERE status IN ('queued', 'sending')`)
}
