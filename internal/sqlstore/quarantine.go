package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sendonce/sendonce/internal/core"
)

// KnownCorrespondent implements core.QuarantineReads: two index lookups,
// send_addresses (tenant, address) and received_messages (tenant, sender).
func (s *Store) KnownCorrespondent(ctx context.Context, tenant, address string) (bool, error) {
	if address == "" {
		return false, nil
	}
	n, err := queryCount(ctx, s.r, "known correspondent", `SELECT CASE WHEN EXISTS (SELECT 1 FROM send_addresses WHERE tenant = ? AND address = ?)
		OR EXISTS (SELECT 1 FROM received_messages WHERE tenant = ? AND sender = ? AND folder <> ?) THEN 1 ELSE 0 END`,
		tenant, address, tenant, address, core.FolderQuarantine)
	return n == 1, err
}

// ReleaseReceived implements core.QuarantineTx. The WHERE decides: of two
// releases at once, one moves the message and the other finds it moved.
func (t *Tx) ReleaseReceived(ctx context.Context, tenant, id string) (bool, error) {
	n, err := t.q.exec(ctx, `UPDATE received_messages SET folder = ? WHERE tenant = ? AND id = ? AND folder = ?`,
		core.FolderInbox, tenant, id, core.FolderQuarantine)
	if err != nil {
		return false, fmt.Errorf("release received message: %w", err)
	}
	return n == 1, nil
}

// SetReceivedThread implements core.QuarantineTx.
func (t *Tx) SetReceivedThread(ctx context.Context, tenant, id, threadID, sendID string) error {
	if _, err := t.q.exec(ctx, `UPDATE received_messages SET thread_id = ?, send_id = ? WHERE tenant = ? AND id = ?`,
		threadID, sendID, tenant, id); err != nil {
		return fmt.Errorf("file released message: %w", err)
	}
	return nil
}

// DeleteReceived implements core.QuarantineTx.
func (t *Tx) DeleteReceived(ctx context.Context, tenant, id string) error {
	var (
		digest string
		size   int64
	)
	err := t.q.queryRow(ctx, `SELECT digest, size FROM received_messages WHERE tenant = ? AND id = ?`, tenant, id).Scan(&digest, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return core.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete received message: %w", err)
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`DELETE FROM received_messages WHERE tenant = ? AND id = ?`, []any{tenant, id}},
		{`DELETE FROM thread_messages WHERE tenant = ? AND kind = ? AND ref_id = ?`, []any{tenant, core.ThreadReceived, id}},
		// What the tenant keeps shrinks by the message (migration 0021).
		{`UPDATE received_usage SET messages = messages - 1, bytes = bytes - ? WHERE tenant = ?`, []any{size, tenant}},
		{`DELETE FROM received_raw WHERE tenant = ? AND digest = ? AND NOT EXISTS
			(SELECT 1 FROM received_messages m WHERE m.tenant = ? AND m.digest = ?)`, []any{tenant, digest, tenant, digest}},
	} {
		if _, err := t.q.exec(ctx, q.sql, q.args...); err != nil {
			return fmt.Errorf("delete received message: %w", err)
		}
	}
	return nil
}

// SetMailboxQuarantine implements core.QuarantineTx.
func (t *Tx) SetMailboxQuarantine(ctx context.Context, tenant, id, rule string) error {
	n, err := t.q.exec(ctx, `UPDATE mailboxes SET quarantine = ? WHERE tenant = ? AND id = ?`, rule, tenant, id)
	if err != nil {
		return fmt.Errorf("set mailbox quarantine: %w", err)
	}
	if n == 0 {
		return core.ErrNotFound
	}
	return nil
}
