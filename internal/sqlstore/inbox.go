package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sendonce/sendonce/internal/core"
)

const inboxColumns = `id, tenant, send_id, message_id, mail_from, rcpt_to, subject, raw, received_at`

func scanInbox(r rowScanner) (*core.InboxMessage, error) {
	var (
		m          core.InboxMessage
		rcpt       string
		receivedAt int64
	)
	err := r.Scan(&m.ID, &m.Tenant, &m.SendID, &m.MessageID, &m.From, &rcpt, &m.Subject, &m.Raw, &receivedAt)
	if err := rowErr("scan inbox message", err); err != nil {
		return nil, err
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
	return list(ctx, s.r, "list inbox", scanInbox, []*core.InboxMessage{},
		`SELECT `+inboxColumns+` FROM inbox_messages WHERE tenant = ? ORDER BY id DESC LIMIT ?`, tenant, limit)
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
