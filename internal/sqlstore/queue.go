package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// ClaimDue implements core.Tx: one statement claims the batch.
func (t *Tx) ClaimDue(ctx context.Context, p core.ClaimParams) ([]*core.Send, error) {
	now, lease, token, limit := p.Now, p.LeaseUntil, p.Token, p.Limit
	// A scheduled send is queued from its time on (API contract, section
	// 9); the partial index makes this a look at an empty range when none
	// is due.
	if _, err := t.q.exec(ctx, `UPDATE sends SET status = 'queued', updated_at = ?
		WHERE status = 'scheduled' AND next_attempt_at <= ?`, micros(now), micros(now)); err != nil {
		return nil, fmt.Errorf("queue scheduled sends: %w", err)
	}
	rows, err := t.q.query(ctx, `UPDATE sends SET status = 'sending', attempt_token = ?, lease_until = ?,
		tries = tries + 1, next_attempt_at = NULL, updated_at = ?
		WHERE id IN (SELECT id FROM sends WHERE status = 'queued' AND next_attempt_at <= ?
			ORDER BY next_attempt_at LIMIT ?`+t.s.skipLocked+`)
		RETURNING `+sendColumns, token, micros(lease), micros(now), micros(now), limit)
	if err != nil {
		return nil, fmt.Errorf("claim due sends: %w", err)
	}
	return collectSends(rows)
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
	var n int
	if err := s.r.queryRow(ctx, `SELECT count(*) FROM sends WHERE status IN ('queued', 'sending')`).Scan(&n); err != nil {
		return 0, fmt.Errorf("queue depth: %w", err)
	}
	return n, nil
}
