package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

const suppressionColumns = `id, tenant, address, reason, origin, send_id, created_at, stream`

func scanSuppression(r rowScanner) (*core.Suppression, error) {
	var (
		s  core.Suppression
		at int64
	)
	err := r.Scan(&s.ID, &s.Tenant, &s.Address, &s.Reason, &s.Origin, &s.SendID, &at, &s.Stream)
	if err := rowErr("scan suppression", err); err != nil {
		return nil, err
	}
	s.CreatedAt = fromMicros(at)
	return &s, nil
}

// suppressionKey is the column a suppression is looked up by: ids start
// with "sup_", addresses hold an @.
func suppressionKey(emailOrID string) (column, value string) {
	if strings.HasPrefix(emailOrID, "sup_") && !strings.Contains(emailOrID, "@") {
		return "id", emailOrID
	}
	return "address", core.NormalizeAddress(emailOrID)
}

// Suppression implements core.Store.
func (s *Store) Suppression(ctx context.Context, tenant, emailOrID string) (*core.Suppression, error) {
	col, v := suppressionKey(emailOrID)
	return scanSuppression(s.r.queryRow(ctx, `SELECT `+suppressionColumns+` FROM suppressions WHERE tenant = ? AND `+col+` = ?`, tenant, v))
}

// ListSuppressions implements core.Store: newest first (ids are ordered by
// their creation time).
func (s *Store) ListSuppressions(ctx context.Context, tenant string, f core.SuppressionFilter) ([]*core.Suppression, string, error) {
	q, args := `SELECT `+suppressionColumns+` FROM suppressions WHERE tenant = ?`, []any{tenant}
	if f.Email != "" {
		q, args = q+` AND address = ?`, append(args, core.NormalizeAddress(f.Email))
	}
	if f.Origin != "" {
		q, args = q+` AND origin = ?`, append(args, f.Origin)
	}
	if f.After != "" {
		q, args = q+` AND id < ?`, append(args, f.After)
	}
	out, err := list(ctx, s.r, "list suppressions", scanSuppression, []*core.Suppression{},
		q+` ORDER BY id DESC LIMIT ?`, append(args, f.Limit+1)...)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > f.Limit {
		out = out[:f.Limit]
		next = out[f.Limit-1].ID
	}
	return out, next, nil
}

// AddSuppression implements core.Tx.
func (t *Tx) AddSuppression(ctx context.Context, sup *core.Suppression) (bool, error) {
	sup.Address = core.NormalizeAddress(sup.Address)
	// An entry for every stream over one for a single stream (a bounce
	// after an unsubscribe) widens it: the address no longer takes any mail.
	n, err := t.q.exec(ctx, `INSERT INTO suppressions (`+suppressionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, address) DO UPDATE SET stream = '', origin = excluded.origin, reason = excluded.reason,
			send_id = excluded.send_id
		WHERE suppressions.stream <> '' AND excluded.stream = ''`,
		sup.ID, sup.Tenant, sup.Address, sup.Reason, sup.Origin, sup.SendID, micros(sup.CreatedAt), string(sup.Stream))
	if err != nil {
		return false, fmt.Errorf("add suppression: %w", err)
	}
	stored, err := scanSuppression(t.q.queryRow(ctx, `SELECT `+suppressionColumns+` FROM suppressions
		WHERE tenant = ? AND address = ?`, sup.Tenant, sup.Address))
	if err != nil {
		return false, err
	}
	*sup = *stored
	return n == 1, nil
}

// DeleteSuppression implements core.Tx.
func (t *Tx) DeleteSuppression(ctx context.Context, tenant, emailOrID string) (*core.Suppression, error) {
	col, v := suppressionKey(emailOrID)
	sup, err := scanSuppression(t.q.queryRow(ctx, `DELETE FROM suppressions WHERE tenant = ? AND `+col+` = ?
		RETURNING `+suppressionColumns, tenant, v))
	if err != nil {
		return nil, err
	}
	return sup, nil
}

// IsSuppressed implements core.Store.
func (s *Store) IsSuppressed(ctx context.Context, tenant, address string) (bool, error) {
	n, err := queryCount(ctx, s.r, "check suppression", `SELECT count(*) FROM suppressions WHERE tenant = ? AND address = ?`,
		tenant, core.NormalizeAddress(address))
	return n > 0, err
}

// SuppressedFor implements core.Store.
func (s *Store) SuppressedFor(ctx context.Context, tenant, address string, stream core.Stream) (bool, error) {
	n, err := queryCount(ctx, s.r, "check suppression", `SELECT count(*) FROM suppressions WHERE tenant = ? AND address = ? AND stream IN ('', ?)`,
		tenant, core.NormalizeAddress(address), string(stream.Or(core.StreamTransactional)))
	return n > 0, err
}

// AddUnsubscribe implements core.Tx.
func (t *Tx) AddUnsubscribe(ctx context.Context, sendID, address, via string, at time.Time) (bool, error) {
	n, err := t.q.exec(ctx, `INSERT INTO unsubscribes (send_id, address, via, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (send_id, address) DO NOTHING`, sendID, core.NormalizeAddress(address), via, micros(at))
	if err != nil {
		return false, fmt.Errorf("add unsubscribe: %w", err)
	}
	return n == 1, nil
}
