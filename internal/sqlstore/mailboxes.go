package sqlstore

import (
	"context"
	"fmt"

	"github.com/sendonce/sendonce/internal/core"
)

const mailboxColumns = `tenant, id, address, name, transport, receive_only, created_at, imap, imap_shown, quarantine`

func scanMailbox(r rowScanner) (*core.Mailbox, error) {
	var (
		m         core.Mailbox
		createdAt int64
	)
	err := r.Scan(&m.Tenant, &m.ID, &m.Address, &m.Name, &m.Transport, &m.ReceiveOnly, &createdAt, &m.IMAP, &m.IMAPShown, &m.Quarantine)
	if err := rowErr("scan mailbox", err); err != nil {
		return nil, err
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
	return list(ctx, s.r, "list mailboxes", scanMailbox, nil,
		`SELECT `+mailboxColumns+` FROM mailboxes WHERE tenant = ? ORDER BY id`, tenant)
}

// InsertMailbox implements core.Tx; core.CodeConflict when the id is taken.
func (t *Tx) InsertMailbox(ctx context.Context, m *core.Mailbox) error {
	n, err := t.q.exec(ctx, `INSERT INTO mailboxes (`+mailboxColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, id) DO NOTHING`,
		m.Tenant, m.ID, m.Address, m.Name, m.Transport, m.ReceiveOnly, micros(m.CreatedAt), m.IMAP, m.IMAPShown, m.Quarantine)
	if err != nil {
		return fmt.Errorf("insert mailbox: %w", err)
	}
	if n != 1 {
		return core.Errorf(core.CodeConflict, "id", "mailbox %q already exists", m.ID)
	}
	return nil
}
