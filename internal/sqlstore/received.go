package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

const receivedBaseColumns = `id, tenant, mailbox_id, thread_id, dedup_key, digest, source, mail_from, rcpt_to, remote_ip,
	message_id, in_reply_to, refs, from_addr, to_addrs, cc_addrs, reply_to, subject, sent_date, text_body, html_body,
	headers, attachments, auth, size, is_read, send_id, received_at, preview`

// receivedInsertColumns are what InsertReceived writes; receivedColumns
// what reads return, where a message outside the quarantine shows its
// thread's folder (archive, spam, trash: a thread is moved as a whole).
const (
	receivedInsertColumns = receivedBaseColumns + `, folder, sender`
	receivedColumns       = receivedBaseColumns + `, CASE WHEN received_messages.folder = 'quarantine' THEN 'quarantine'
	ELSE coalesce((SELECT t.folder FROM threads t WHERE t.id = received_messages.thread_id), received_messages.folder) END, sender`
)

// receivedListColumns are receivedColumns without the bodies and headers
// (read back empty): a list shows the preview, and a stranger's 8 MB
// message costs a list no more than its metadata.
var receivedListColumns = strings.Replace(receivedColumns, "text_body, html_body,\n\theaders,",
	"'' AS text_body, '' AS html_body,\n\t'[]' AS headers,", 1)

func scanReceived(r rowScanner) (*core.ReceivedMessage, error) {
	var (
		m                                             core.ReceivedMessage
		rcpt, refs, to, cc, replyTo, hdrs, atts, auth string
		sentDate                                      sql.NullInt64
		receivedAt                                    int64
	)
	err := r.Scan(&m.ID, &m.Tenant, &m.MailboxID, &m.ThreadID, &m.DedupKey, &m.Digest, &m.Source, &m.MailFrom, &rcpt,
		&m.RemoteIP, &m.MessageID, &m.InReplyTo, &refs, &m.From, &to, &cc, &replyTo, &m.Subject, &sentDate, &m.Text,
		&m.HTML, &hdrs, &atts, &auth, &m.Size, &m.Read, &m.SendID, &receivedAt, &m.Preview, &m.Folder, &m.Sender)
	if err := rowErr("scan received message", err); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		src string
		dst any
	}{{rcpt, &m.RcptTo}, {refs, &m.References}, {to, &m.To}, {cc, &m.Cc}, {replyTo, &m.ReplyTo},
		{hdrs, &m.Headers}, {atts, &m.Attachments}, {auth, &m.Auth}} {
		if err := json.Unmarshal([]byte(f.src), f.dst); err != nil {
			return nil, fmt.Errorf("decode received message %s: %w", m.ID, err)
		}
	}
	if sentDate.Valid {
		d := fromMicros(sentDate.Int64)
		m.Date = &d
	}
	m.ReceivedAt = fromMicros(receivedAt)
	return &m, nil
}

// InsertReceived implements core.ReceivingTx. The dedup index decides:
// of two copies inserted at once, one waits for the other's commit and
// then finds it.
func (t *Tx) InsertReceived(ctx context.Context, m *core.ReceivedMessage, raw []byte) (string, string, bool, error) {
	var date any
	if m.Date != nil {
		date = micros(*m.Date)
	}
	n, err := t.q.exec(ctx, `INSERT INTO received_messages (`+receivedInsertColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, dedup_key) DO NOTHING`,
		m.ID, m.Tenant, m.MailboxID, m.ThreadID, m.DedupKey, m.Digest, m.Source, m.MailFrom, jsonText(nonNil(m.RcptTo)),
		m.RemoteIP, m.MessageID, m.InReplyTo, jsonText(nonNil(m.References)), m.From, jsonText(nonNil(m.To)),
		jsonText(nonNil(m.Cc)), jsonText(nonNil(m.ReplyTo)), m.Subject, date, m.Text, m.HTML,
		jsonText(nonNil(m.Headers)), jsonText(nonNil(m.Attachments)), jsonText(m.Auth), m.Size, m.Read, m.SendID,
		micros(m.ReceivedAt), m.Preview, cmp.Or(m.Folder, core.FolderInbox), m.Sender)
	if err != nil {
		return "", "", false, fmt.Errorf("insert received message: %w", err)
	}
	if n == 0 {
		var id, thread string
		err := t.q.queryRow(ctx, `SELECT id, thread_id FROM received_messages WHERE tenant = ? AND dedup_key = ?`,
			m.Tenant, m.DedupKey).Scan(&id, &thread)
		if err != nil {
			return "", "", false, fmt.Errorf("read received duplicate: %w", err)
		}
		return id, thread, false, nil
	}
	if _, err := t.q.exec(ctx, `INSERT INTO received_raw (tenant, digest, raw, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (tenant, digest) DO NOTHING`, m.Tenant, m.Digest, raw, micros(m.ReceivedAt)); err != nil {
		return "", "", false, fmt.Errorf("insert received raw: %w", err)
	}
	if _, err := t.q.exec(ctx, `INSERT INTO received_usage (tenant, messages, bytes) VALUES (?, 1, ?)
		ON CONFLICT (tenant) DO UPDATE SET messages = received_usage.messages + 1,
		bytes = received_usage.bytes + excluded.bytes`, m.Tenant, m.Size); err != nil {
		return "", "", false, fmt.Errorf("count received usage: %w", err)
	}
	return m.ID, m.ThreadID, true, nil
}

// ReceivedMessage implements core.Receiving.
func (s *Store) ReceivedMessage(ctx context.Context, tenant, id string) (*core.ReceivedMessage, error) {
	return scanReceived(s.r.queryRow(ctx, `SELECT `+receivedColumns+` FROM received_messages WHERE tenant = ? AND id = ?`, tenant, id))
}

// ReceivedRaw implements core.Receiving.
func (s *Store) ReceivedRaw(ctx context.Context, tenant, id string) ([]byte, error) {
	var raw []byte
	err := s.r.queryRow(ctx, `SELECT r.raw FROM received_messages m JOIN received_raw r ON r.tenant = m.tenant AND r.digest = m.digest
		WHERE m.tenant = ? AND m.id = ?`, tenant, id).Scan(&raw)
	if err := rowErr("read received raw", err); err != nil {
		return nil, err
	}
	return raw, nil
}

// ReceivedUsage implements core.Receiving.
func (s *Store) ReceivedUsage(ctx context.Context, tenant string) (int, int64, error) {
	var (
		n     int
		bytes int64
	)
	// One row kept current by every write (migration 0021), not a sum over
	// the messages: this is read before every message is stored. A message
	// stored for several mailboxes counts once per mailbox: the cap errs low.
	err := s.r.queryRow(ctx, `SELECT messages, bytes FROM received_usage WHERE tenant = ?`, tenant).Scan(&n, &bytes)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("received usage: %w", err)
	}
	return n, bytes, nil
}

// ListReceived implements core.Receiving: newest first (ids are ULIDs),
// without bodies or headers.
func (s *Store) ListReceived(ctx context.Context, tenant string, f core.ReceivedFilter) ([]*core.ReceivedMessage, bool, error) {
	where, args := []string{"tenant = ?"}, []any{tenant}
	if len(f.MailboxIDs) > 0 {
		where = append(where, "mailbox_id IN (?"+strings.Repeat(", ?", len(f.MailboxIDs)-1)+")")
		for _, id := range f.MailboxIDs {
			args = append(args, id)
		}
	}
	add := func(cond string, v any) { where, args = append(where, cond), append(args, v) }
	if f.ThreadID != "" {
		add("thread_id = ?", f.ThreadID)
	}
	if f.From != "" {
		add("lower(from_addr) LIKE ?", "%"+likeEscape(strings.ToLower(f.From))+"%")
	}
	if f.Since != nil {
		add("received_at >= ?", micros(*f.Since))
	}
	if f.Until != nil {
		add("received_at < ?", micros(*f.Until))
	}
	if f.HasAttachment != nil {
		if *f.HasAttachment {
			where = append(where, "attachments <> '[]'")
		} else {
			where = append(where, "attachments = '[]'")
		}
	}
	if len(f.IDs) > 0 {
		where = append(where, "id IN (?"+strings.Repeat(", ?", len(f.IDs)-1)+")")
		for _, id := range f.IDs {
			args = append(args, id)
		}
	}
	if f.After != "" {
		add("id < ?", f.After)
	}
	if f.Folder == core.FolderQuarantine {
		add("received_messages.folder = ?", core.FolderQuarantine)
	} else {
		add("received_messages.folder <> ?", core.FolderQuarantine)
	}
	return listPage(ctx, s.r, "list received", scanReceived, []*core.ReceivedMessage{}, f.Limit,
		`SELECT `+receivedListColumns+` FROM received_messages WHERE `+strings.Join(where, " AND ")+` ORDER BY id DESC LIMIT ?`, args...)
}

// likeEscape makes s match itself in a LIKE pattern with no ESCAPE
// clause: the wildcards it holds are dropped.
func likeEscape(s string) string {
	return strings.NewReplacer("%", "", "_", "").Replace(s)
}

// SetReceivedRead implements core.ReceivingTx.
func (t *Tx) SetReceivedRead(ctx context.Context, tenant, id string, read bool) error {
	return t.execOne(ctx, "mark received message", `UPDATE received_messages SET is_read = ? WHERE tenant = ? AND id = ?`, read, tenant, id)
}

// ReceivingRoute implements core.Receiving.
func (s *Store) ReceivingRoute(ctx context.Context, address string) (*core.ReceivingAddress, error) {
	addr := strings.ToLower(address)
	domain := addr
	if at := strings.LastIndexByte(addr, '@'); at >= 0 {
		domain = addr[at:]
	}
	var (
		a  core.ReceivingAddress
		at int64
	)
	// The address's own row sorts before its domain's '@…' row.
	err := s.r.queryRow(ctx, `SELECT address, tenant, mailbox_id, created_at FROM receiving_addresses
		WHERE address IN (?, ?) ORDER BY address DESC LIMIT 1`, addr, domain).Scan(&a.Address, &a.Tenant, &a.MailboxID, &at)
	if err := rowErr("receiving route", err); err != nil {
		return nil, err
	}
	a.CreatedAt = fromMicros(at)
	return &a, nil
}

// ReceivingAddresses implements core.Receiving.
func (s *Store) ReceivingAddresses(ctx context.Context, tenant, mailboxID string) ([]string, error) {
	return list(ctx, s.r, "receiving addresses", scanString, []string{}, `SELECT address FROM receiving_addresses WHERE tenant = ? AND mailbox_id = ? ORDER BY address`, tenant, mailboxID)
}

// AddReceivingAddress implements core.ReceivingTx: an address another
// mailbox of the tenant holds already is CodeConflict, one of another
// tenant core.ErrReceivingHeld.
func (t *Tx) AddReceivingAddress(ctx context.Context, a core.ReceivingAddress) error {
	n, err := t.q.exec(ctx, `INSERT INTO receiving_addresses (address, tenant, mailbox_id, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (address) DO NOTHING`, strings.ToLower(a.Address), a.Tenant, a.MailboxID, micros(a.CreatedAt))
	if err != nil {
		return fmt.Errorf("add receiving address: %w", err)
	}
	if n == 0 {
		var tenant, mailbox string
		err := t.q.queryRow(ctx, `SELECT tenant, mailbox_id FROM receiving_addresses WHERE address = ?`,
			strings.ToLower(a.Address)).Scan(&tenant, &mailbox)
		if err == nil && tenant == a.Tenant && mailbox == a.MailboxID {
			return nil
		}
		if err == nil && tenant != a.Tenant {
			return core.ErrReceivingHeld
		}
		return core.Errorf(core.CodeConflict, "email_address", "the address %s already receives for another inbox", a.Address)
	}
	return nil
}

// RemoveReceivingAddresses implements core.ReceivingTx.
func (t *Tx) RemoveReceivingAddresses(ctx context.Context, tenant, mailboxID string) error {
	if _, err := t.q.exec(ctx, `DELETE FROM receiving_addresses WHERE tenant = ? AND mailbox_id = ?`, tenant, mailboxID); err != nil {
		return fmt.Errorf("remove receiving addresses: %w", err)
	}
	return nil
}

// QueueTenantWebhook implements core.ReceivingTx.
func (t *Tx) QueueTenantWebhook(ctx context.Context, tenant, event, eventID, subject string, body []byte, at time.Time) error {
	return t.queueExec(ctx, "queue webhook deliveries", `INSERT INTO webhook_deliveries
		(webhook_id, event_id, tenant, send_id, event, status, tries, next_attempt_at, body, created_at, updated_at)
		SELECT ws.webhook_id, ?, ?, ?, ?, 'pending', 0, ?, ?, ?, ?
		FROM webhook_subscriptions ws WHERE ws.tenant = ? AND ws.event = ?`,
		eventID, tenant, subject, event, micros(at), body, micros(at), micros(at), tenant, event)
}

// UpdateMailboxName implements core.ReceivingTx.
func (t *Tx) UpdateMailboxName(ctx context.Context, tenant, id, name string) error {
	return t.execOne(ctx, "update mailbox", `UPDATE mailboxes SET name = ? WHERE tenant = ? AND id = ?`, name, tenant, id)
}

// DeleteMailbox implements core.ReceivingTx: the mailbox and its receiving
// addresses; its received mail and threads stay until deleted or expired.
func (t *Tx) DeleteMailbox(ctx context.Context, tenant, id string) error {
	if err := t.execOne(ctx, "delete mailbox", `DELETE FROM mailboxes WHERE tenant = ? AND id = ?`, tenant, id); err != nil {
		return err
	}
	return t.RemoveReceivingAddresses(ctx, tenant, id)
}
