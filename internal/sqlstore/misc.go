package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

const keyColumns = `id, tenant, name, secret_hash, scopes, mailboxes, requires_approval, created_at, revoked_at,
	agent, allow_recipients, max_per_hour, max_per_day, rate_limit`

func scanKey(r rowScanner) (*core.APIKey, error) {
	var (
		k                        core.APIKey
		scopes, mailboxes, allow string
		createdAt                int64
		revokedAt                sql.NullInt64
	)
	err := r.Scan(&k.ID, &k.Tenant, &k.Name, &k.SecretHash, &scopes, &mailboxes, &k.RequiresApproval, &createdAt, &revokedAt,
		&k.Agent, &allow, &k.MaxPerHour, &k.MaxPerDay, &k.RateLimit)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("scan api key: %w", err)
	}
	for _, sc := range strings.Split(scopes, ",") {
		if sc != "" {
			k.Scopes = append(k.Scopes, core.Scope(sc))
		}
	}
	for _, m := range strings.Split(mailboxes, ",") {
		if m != "" {
			k.Mailboxes = append(k.Mailboxes, m)
		}
	}
	for _, a := range strings.Split(allow, ",") {
		if a != "" {
			k.AllowRecipients = append(k.AllowRecipients, a)
		}
	}
	k.CreatedAt, k.RevokedAt = fromMicros(createdAt), fromNullMicros(revokedAt)
	return &k, nil
}

// APIKey implements core.Store. It reads through the writer's database file
// on every request, so a key created or revoked by another process counts at
// once.
func (s *Store) APIKey(ctx context.Context, id string) (*core.APIKey, error) {
	return scanKey(s.r.queryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE id = ?`, id))
}

// ListAPIKeys implements core.Store.
func (s *Store) ListAPIKeys(ctx context.Context) ([]*core.APIKey, error) {
	rows, err := s.r.query(ctx, `SELECT `+keyColumns+` FROM api_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	defer rows.Close()
	var out []*core.APIKey
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// InsertAPIKey implements core.Tx.
func (t *Tx) InsertAPIKey(ctx context.Context, k *core.APIKey) error {
	scopes := make([]string, len(k.Scopes))
	for i, s := range k.Scopes {
		scopes[i] = string(s)
	}
	_, err := t.q.exec(ctx, `INSERT INTO api_keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.Tenant, k.Name, k.SecretHash, strings.Join(scopes, ","), strings.Join(k.Mailboxes, ","),
		k.RequiresApproval, micros(k.CreatedAt), nullMicros(k.RevokedAt),
		k.Agent, strings.Join(k.AllowRecipients, ","), k.MaxPerHour, k.MaxPerDay, k.RateLimit)
	if err != nil {
		return fmt.Errorf("insert api key: %w", err)
	}
	return nil
}

// RevokeAPIKey implements core.Tx.
func (t *Tx) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	n, err := t.q.exec(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?`, micros(at), id)
	if err != nil {
		return fmt.Errorf("revoke api key: %w", err)
	}
	if n != 1 {
		return core.ErrNotFound
	}
	return nil
}

const templateColumns = `tenant, id, subject, text_body, html_body, compat, created_at, updated_at`

func scanTemplate(r rowScanner) (*core.Template, error) {
	var (
		t                    core.Template
		createdAt, updatedAt int64
	)
	err := r.Scan(&t.Tenant, &t.ID, &t.Subject, &t.Text, &t.HTML, &t.Compat, &createdAt, &updatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("scan template: %w", err)
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
	rows, err := s.r.query(ctx, `SELECT `+templateColumns+` FROM templates WHERE tenant = ? ORDER BY id`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	defer rows.Close()
	out := []*core.Template{}
	for rows.Next() {
		t, err := scanTemplate(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// PutTemplate implements core.Tx.
func (t *Tx) PutTemplate(ctx context.Context, tp *core.Template) (bool, error) {
	var n int
	if err := t.q.queryRow(ctx, `SELECT count(*) FROM templates WHERE tenant = ? AND id = ?`, tp.Tenant, tp.ID).Scan(&n); err != nil {
		return false, fmt.Errorf("put template: %w", err)
	}
	_, err := t.q.exec(ctx, `INSERT INTO templates (`+templateColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
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
	n, err := t.q.exec(ctx, `DELETE FROM templates WHERE tenant = ? AND id = ?`, tenant, id)
	if err != nil {
		return fmt.Errorf("delete template: %w", err)
	}
	if n != 1 {
		return core.ErrNotFound
	}
	return nil
}

const mailboxColumns = `tenant, id, address, name, transport, receive_only, created_at`

func scanMailbox(r rowScanner) (*core.Mailbox, error) {
	var (
		m         core.Mailbox
		createdAt int64
	)
	err := r.Scan(&m.Tenant, &m.ID, &m.Address, &m.Name, &m.Transport, &m.ReceiveOnly, &createdAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("scan mailbox: %w", err)
	}
	m.CreatedAt = fromMicros(createdAt)
	return &m, nil
}

// Mailbox implements core.Store.
func (s *Store) Mailbox(ctx context.Context, tenant, id string) (*core.Mailbox, error) {
	return scanMailbox(s.r.queryRow(ctx, `SELECT `+mailboxColumns+` FROM mailboxes WHERE tenant = ? AND id = ?`, tenant, id))
}

// ListMailboxes implements core.Store.
func (s *Store) ListMailboxes(ctx context.Context, tenant string) ([]*core.Mailbox, error) {
	rows, err := s.r.query(ctx, `SELECT `+mailboxColumns+` FROM mailboxes WHERE tenant = ? ORDER BY id`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list mailboxes: %w", err)
	}
	defer rows.Close()
	var out []*core.Mailbox
	for rows.Next() {
		m, err := scanMailbox(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// InsertMailbox implements core.Tx; core.CodeConflict when the id is taken.
func (t *Tx) InsertMailbox(ctx context.Context, m *core.Mailbox) error {
	n, err := t.q.exec(ctx, `INSERT INTO mailboxes (`+mailboxColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, id) DO NOTHING`,
		m.Tenant, m.ID, m.Address, m.Name, m.Transport, m.ReceiveOnly, micros(m.CreatedAt))
	if err != nil {
		return fmt.Errorf("insert mailbox: %w", err)
	}
	if n != 1 {
		return core.Errorf(core.CodeConflict, "id", "mailbox %q already exists", m.ID)
	}
	return nil
}

const inboxColumns = `id, tenant, send_id, message_id, mail_from, rcpt_to, subject, raw, received_at`

func scanInbox(r rowScanner) (*core.InboxMessage, error) {
	var (
		m          core.InboxMessage
		rcpt       string
		receivedAt int64
	)
	err := r.Scan(&m.ID, &m.Tenant, &m.SendID, &m.MessageID, &m.From, &rcpt, &m.Subject, &m.Raw, &receivedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("scan inbox message: %w", err)
	}
	if err := json.Unmarshal([]byte(rcpt), &m.To); err != nil {
		return nil, fmt.Errorf("decode inbox message %s: %w", m.ID, err)
	}
	m.ReceivedAt = fromMicros(receivedAt)
	return &m, nil
}

// InboxMessage implements core.Store.
func (s *Store) InboxMessage(ctx context.Context, tenant, id string) (*core.InboxMessage, error) {
	return scanInbox(s.r.queryRow(ctx, `SELECT `+inboxColumns+` FROM inbox_messages WHERE tenant = ? AND id = ?`, tenant, id))
}

// ListInbox implements core.Store: newest first.
func (s *Store) ListInbox(ctx context.Context, tenant string, limit int) ([]*core.InboxMessage, error) {
	rows, err := s.r.query(ctx, `SELECT `+inboxColumns+` FROM inbox_messages WHERE tenant = ? ORDER BY id DESC LIMIT ?`, tenant, limit)
	if err != nil {
		return nil, fmt.Errorf("list inbox: %w", err)
	}
	defer rows.Close()
	out := []*core.InboxMessage{}
	for rows.Next() {
		m, err := scanInbox(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// InsertInboxMessage implements core.Tx.
func (t *Tx) InsertInboxMessage(ctx context.Context, m *core.InboxMessage) error {
	_, err := t.q.exec(ctx, `INSERT INTO inbox_messages (`+inboxColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		m.ID, m.Tenant, m.SendID, m.MessageID, m.From, jsonText(nonNil(m.To)), m.Subject, m.Raw, micros(m.ReceivedAt))
	if err != nil {
		return fmt.Errorf("insert inbox message: %w", err)
	}
	return nil
}
