package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// Drafts (core.Drafts, core.DraftsTx). The content is stored as text on
// both databases (pgx would send []byte as bytea).

const draftColumns = `id, tenant, mailbox_id, reply_to_id, thread_id, content, version, idempotency_key, send_id, created_at, updated_at, sent_at`

func scanDraft(r rowScanner) (*core.Draft, error) {
	var (
		d                    core.Draft
		content              string
		sendID               sql.NullString
		createdAt, updatedAt int64
		sentAt               sql.NullInt64
	)
	err := r.Scan(&d.ID, &d.Tenant, &d.MailboxID, &d.ReplyToID, &d.ThreadID, &content, &d.Version,
		&d.IdempotencyKey, &sendID, &createdAt, &updatedAt, &sentAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("scan draft: %w", err)
	}
	d.Content, d.SendID = []byte(content), sendID.String
	d.CreatedAt, d.UpdatedAt, d.SentAt = fromMicros(createdAt), fromMicros(updatedAt), fromNullMicros(sentAt)
	return &d, nil
}

// Draft implements core.Store.
func (s *Store) Draft(ctx context.Context, tenant, id string) (*core.Draft, error) {
	return scanDraft(s.r.queryRow(ctx, `SELECT `+draftColumns+` FROM drafts WHERE tenant = ? AND id = ?`, tenant, id))
}

// ListDrafts implements core.Store.
func (s *Store) ListDrafts(ctx context.Context, tenant string, f core.DraftFilter) ([]*core.Draft, error) {
	q := `SELECT ` + draftColumns + ` FROM drafts WHERE tenant = ?`
	args := []any{tenant}
	if f.After != "" {
		q += ` AND id < ?`
		args = append(args, f.After)
	}
	if len(f.MailboxIDs) > 0 {
		q += ` AND mailbox_id IN (?` + strings.Repeat(`, ?`, len(f.MailboxIDs)-1) + `)`
		for _, m := range f.MailboxIDs {
			args = append(args, m)
		}
	}
	q += ` ORDER BY id DESC LIMIT ?`
	args = append(args, f.Limit)
	return list(ctx, s.r, "list drafts", scanDraft, []*core.Draft{}, q, args...)
}

// InsertDraft implements core.Tx.
func (t *Tx) InsertDraft(ctx context.Context, d *core.Draft) error {
	_, err := t.q.exec(ctx, `INSERT INTO drafts (`+draftColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.ID, d.Tenant, d.MailboxID, d.ReplyToID, d.ThreadID, string(d.Content), d.Version, d.IdempotencyKey,
		nullString(d.SendID), micros(d.CreatedAt), micros(d.UpdatedAt), nullMicros(d.SentAt))
	if err != nil {
		return fmt.Errorf("insert draft: %w", err)
	}
	return nil
}

// UpdateDraft implements core.Tx.
func (t *Tx) UpdateDraft(ctx context.Context, d *core.Draft, version int) (bool, error) {
	n, err := t.q.exec(ctx, `UPDATE drafts SET content = ?, mailbox_id = ?, version = ?, updated_at = ?
		WHERE tenant = ? AND id = ? AND version = ? AND send_id IS NULL`,
		string(d.Content), d.MailboxID, d.Version, micros(d.UpdatedAt), d.Tenant, d.ID, version)
	if err != nil {
		return false, fmt.Errorf("update draft: %w", err)
	}
	return n == 1, nil
}

// MarkDraftSent implements core.Tx.
func (t *Tx) MarkDraftSent(ctx context.Context, tenant, id string, version int, sendID string, at time.Time) (bool, error) {
	n, err := t.q.exec(ctx, `UPDATE drafts SET send_id = ?, sent_at = ?, updated_at = ?
		WHERE tenant = ? AND id = ? AND version = ? AND send_id IS NULL`,
		sendID, micros(at), micros(at), tenant, id, version)
	if err != nil {
		return false, fmt.Errorf("mark draft sent: %w", err)
	}
	return n == 1, nil
}

// DeleteDraft implements core.Tx.
func (t *Tx) DeleteDraft(ctx context.Context, tenant, id string) (bool, error) {
	n, err := t.q.exec(ctx, `DELETE FROM drafts WHERE tenant = ? AND id = ?`, tenant, id)
	if err != nil {
		return false, fmt.Errorf("delete draft: %w", err)
	}
	return n == 1, nil
}
