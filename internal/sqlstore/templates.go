package sqlstore

import (
	"context"
	"fmt"

	"github.com/sendonce/sendonce/internal/core"
)

const templateColumns = `tenant, id, subject, text_body, html_body, compat, created_at, updated_at`

func scanTemplate(r rowScanner) (*core.Template, error) {
	var (
		t                    core.Template
		createdAt, updatedAt int64
	)
	err := r.Scan(&t.Tenant, &t.ID, &t.Subject, &t.Text, &t.HTML, &t.Compat, &createdAt, &updatedAt)
	if err := rowErr("scan template", err); err != nil {
		return nil, err
	}
	t.CreatedAt, t.UpdatedAt = fromMicros(createdAt), fromMicros(updatedAt)
	return &t, nil
}

// Template implements core.Store.
func (s *Store) Template(ctx context.Context, tenant, id string) (*core.Template, error) {
	return scanTemplate(s.r.queryRow(ctx, `SELECT `+templateColumns+` FROM templates WHERE tenant = ? AND id = ?`, tenant, id))
}

// ListTemplates implements core.Store.
func (s *Store) ListTemplates(ctx context.Context, tenant string) ([]*core.Template, error) {
	return list(ctx, s.r, "list templates", scanTemplate, []*core.Template{},
		`SELECT `+templateColumns+` FROM templates WHERE tenant = ? ORDER BY id`, tenant)
}

// PutTemplate implements core.Tx.
func (t *Tx) PutTemplate(ctx context.Context, tp *core.Template) (bool, error) {
	n, err := queryCount(ctx, t.q, "put template", `SELECT count(*) FROM templates WHERE tenant = ? AND id = ?`, tp.Tenant, tp.ID)
	if err != nil {
		return false, err
	}
	_, err = t.q.exec(ctx, `INSERT INTO templates (`+templateColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, id) DO UPDATE SET subject = excluded.subject, text_body = excluded.text_body,
		html_body = excluded.html_body, updated_at = excluded.updated_at,
		compat = CASE WHEN excluded.compat = '' THEN templates.compat ELSE excluded.compat END`,
		tp.Tenant, tp.ID, tp.Subject, tp.Text, tp.HTML, tp.Compat, micros(tp.CreatedAt), micros(tp.UpdatedAt))
	if err != nil {
		return false, fmt.Errorf("put template: %w", err)
	}
	return n == 0, nil
}

// DeleteTemplate implements core.Tx.
func (t *Tx) DeleteTemplate(ctx context.Context, tenant, id string) error {
	return t.execOne(ctx, "delete template", `DELETE FROM templates WHERE tenant = ? AND id = ?`, tenant, id)
}
