package sqlstore

import (
	"context"
	"fmt"

	"github.com/sendonce/sendonce/internal/core"
)

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
	out, more, err := listPage(ctx, s.r, "list audit", scanAudit, []*core.AuditEntry{}, limit, q+` ORDER BY id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if more {
		next = out[limit-1].ID
	}
	return out, next, nil
}

func scanAudit(r rowScanner) (*core.AuditEntry, error) {
	var (
		e  core.AuditEntry
		at int64
	)
	if err := r.Scan(&e.ID, &e.Tenant, &e.APIKeyID, &at, &e.Route, &e.Intent, &e.IdempotencyKey, &e.Status,
		&e.Outcome, &e.Code, &e.SendID, &e.Detail); err != nil {
		return nil, fmt.Errorf("scan audit entry: %w", err)
	}
	e.At = fromMicros(at)
	return &e, nil
}
