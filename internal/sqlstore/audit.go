package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// CountKeySends implements core.Tx. The key's row is locked first
// (PostgreSQL; SQLite's write transaction excludes other writers anyway), so
// two acceptances by one key never both see room under a cap.
func (t *Tx) CountKeySends(ctx context.Context, keyID string, since time.Time) (int, time.Time, error) {
	var id string
	if err := t.q.queryRow(ctx, `SELECT id FROM api_keys WHERE id = ?`+t.s.forUpdate, keyID).Scan(&id); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, time.Time{}, core.ErrNotFound
		}
		return 0, time.Time{}, fmt.Errorf("lock api key: %w", err)
	}
	var (
		n      int
		oldest sql.NullInt64
	)
	err := t.q.queryRow(ctx, `SELECT count(*), min(created_at) FROM sends WHERE api_key_id = ? AND created_at >= ?`,
		keyID, micros(since)).Scan(&n, &oldest)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("count key sends: %w", err)
	}
	var o time.Time
	if oldest.Valid {
		o = fromMicros(oldest.Int64)
	}
	return n, o, nil
}

// SetSendAPIKey implements core.Tx.
func (t *Tx) SetSendAPIKey(ctx context.Context, sendID, keyID string) error {
	n, err := t.q.exec(ctx, `UPDATE sends SET api_key_id = ? WHERE id = ?`, keyID, sendID)
	if err != nil {
		return fmt.Errorf("set send api key: %w", err)
	}
	if n != 1 {
		return core.ErrNotFound
	}
	return nil
}

const auditColumns = `id, tenant, api_key_id, at, route, intent, idempotency_key, status, outcome, code, send_id, detail`

// InsertAudit implements core.Tx.
func (t *Tx) InsertAudit(ctx context.Context, e *core.AuditEntry) error {
	_, err := t.q.exec(ctx, `INSERT INTO audit_log (`+auditColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, e.Tenant, e.APIKeyID, micros(e.At), e.Route, e.Intent, e.IdempotencyKey, e.Status, e.Outcome,
		e.Code, e.SendID, e.Detail)
	if err != nil {
		return fmt.Errorf("insert audit entry: %w", err)
	}
	return nil
}

// ListAudit implements core.Store: newest first.
func (s *Store) ListAudit(ctx context.Context, tenant string, limit int, after string) ([]*core.AuditEntry, string, error) {
	q, args := `SELECT `+auditColumns+` FROM audit_log WHERE tenant = ?`, []any{tenant}
	if after != "" {
		q, args = q+` AND id < ?`, append(args, after)
	}
	rows, err := s.r.query(ctx, q+` ORDER BY id DESC LIMIT ?`, append(args, limit+1)...)
	if err != nil {
		return nil, "", fmt.Errorf("list audit: %w", err)
	}
	defer rows.Close()
	out := []*core.AuditEntry{}
	for rows.Next() {
		var (
			e  core.AuditEntry
			at int64
		)
		if err := rows.Scan(&e.ID, &e.Tenant, &e.APIKeyID, &at, &e.Route, &e.Intent, &e.IdempotencyKey, &e.Status,
			&e.Outcome, &e.Code, &e.SendID, &e.Detail); err != nil {
			return nil, "", fmt.Errorf("scan audit entry: %w", err)
		}
		e.At = fromMicros(at)
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list audit: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].ID
	}
	return out, next, nil
}
