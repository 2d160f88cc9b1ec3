package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// The connected mailboxes' sync state and leases (imap_sync) and the
// Sent-folder copies owed (imap_appends), migration 0018.

// ConnectedMailboxes implements core.Store.
func (s *Store) ConnectedMailboxes(ctx context.Context) ([]*core.Mailbox, error) {
	return list(ctx, s.r, "list connected mailboxes", scanMailbox, nil,
		`SELECT `+mailboxColumns+` FROM mailboxes WHERE imap IS NOT NULL ORDER BY tenant, id`)
}

// IMAPSyncState implements core.Store.
func (s *Store) IMAPSyncState(ctx context.Context, tenant, mailboxID string) (*core.IMAPSync, error) {
	var (
		st            core.IMAPSync
		validity, uid int64
		status        string
		updated       int64
	)
	err := s.r.queryRow(ctx, `SELECT tenant, mailbox_id, uid_validity, last_uid, status, error_class, failures, updated_at
		FROM imap_sync WHERE tenant = ? AND mailbox_id = ?`, tenant, mailboxID).
		Scan(&st.Tenant, &st.MailboxID, &validity, &uid, &status, &st.ErrorClass, &st.Failures, &updated)
	if err := rowErr("read imap sync state", err); err != nil {
		return nil, err
	}
	st.UIDValidity, st.LastUID = uint32(validity), uint32(uid)
	st.Status, st.UpdatedAt = core.IMAPSyncStatus(status), fromMicros(updated)
	return &st, nil
}

// IMAPAppendsDue implements core.Store.
func (s *Store) IMAPAppendsDue(ctx context.Context, now time.Time) (bool, error) {
	n, err := queryCount(ctx, s.r, "look for due imap appends", `SELECT count(*) FROM (SELECT 1 FROM imap_appends WHERE next_at <= ? AND lease_until < ? LIMIT 1) d`,
		micros(now), micros(now))
	return n > 0, err
}

// SetMailboxIMAP implements core.Tx.
func (t *Tx) SetMailboxIMAP(ctx context.Context, tenant, id string, imap []byte, shown string) error {
	return t.execOne(ctx, "set mailbox imap", `UPDATE mailboxes SET imap = ?, imap_shown = ? WHERE tenant = ? AND id = ?`, imap, shown, tenant, id)
}

// LeaseIMAPSync implements core.Tx: one conditional upsert, so that two
// processes asking at once cannot both win.
func (t *Tx) LeaseIMAPSync(ctx context.Context, tenant, mailboxID, holder string, now, until time.Time) (bool, error) {
	n, err := t.q.exec(ctx, `INSERT INTO imap_sync (tenant, mailbox_id, holder, lease_until, updated_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant, mailbox_id) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until
		WHERE imap_sync.holder = excluded.holder OR imap_sync.lease_until < ?`,
		tenant, mailboxID, holder, micros(until), micros(now), micros(now))
	if err != nil {
		return false, fmt.Errorf("lease imap sync: %w", err)
	}
	return n == 1, nil
}

// ReleaseIMAPSync implements core.Tx.
func (t *Tx) ReleaseIMAPSync(ctx context.Context, tenant, mailboxID, holder string) error {
	if _, err := t.q.exec(ctx, `UPDATE imap_sync SET holder = '', lease_until = 0
		WHERE tenant = ? AND mailbox_id = ? AND holder = ?`, tenant, mailboxID, holder); err != nil {
		return fmt.Errorf("release imap sync: %w", err)
	}
	return nil
}

// SaveIMAPSync implements core.Tx.
func (t *Tx) SaveIMAPSync(ctx context.Context, holder string, st *core.IMAPSync) (bool, error) {
	n, err := t.q.exec(ctx, `UPDATE imap_sync SET uid_validity = ?, last_uid = ?, status = ?, error_class = ?,
		failures = ?, updated_at = ? WHERE tenant = ? AND mailbox_id = ? AND holder = ?`,
		int64(st.UIDValidity), int64(st.LastUID), string(st.Status), st.ErrorClass, st.Failures,
		micros(st.UpdatedAt), st.Tenant, st.MailboxID, holder)
	if err != nil {
		return false, fmt.Errorf("save imap sync state: %w", err)
	}
	return n == 1, nil
}

// QueueIMAPAppend implements core.Tx: the mailbox's row decides whether a
// copy is owed, in the same statement.
func (t *Tx) QueueIMAPAppend(ctx context.Context, tenant, sendID, mailboxID string, now time.Time) error {
	if _, err := t.q.exec(ctx, `INSERT INTO imap_appends (tenant, send_id, mailbox_id, next_at, created_at)
		SELECT tenant, ?, id, ?, ? FROM mailboxes WHERE tenant = ? AND id = ? AND imap IS NOT NULL
		ON CONFLICT (send_id) DO NOTHING`, sendID, micros(now), micros(now), tenant, mailboxID); err != nil {
		return fmt.Errorf("queue imap append: %w", err)
	}
	return nil
}

// ClaimIMAPAppends implements core.Tx.
func (t *Tx) ClaimIMAPAppends(ctx context.Context, holder string, now, until time.Time, n int) ([]core.IMAPAppend, error) {
	return list(ctx, t.q, "claim imap appends", func(r rowScanner) (core.IMAPAppend, error) {
		var a core.IMAPAppend
		if err := r.Scan(&a.Tenant, &a.SendID, &a.MailboxID, &a.Attempts); err != nil {
			return a, fmt.Errorf("scan imap append: %w", err)
		}
		return a, nil
	}, nil, `UPDATE imap_appends SET holder = ?, lease_until = ?, attempts = attempts + 1
		WHERE send_id IN (SELECT send_id FROM imap_appends WHERE next_at <= ? AND lease_until < ?
			ORDER BY next_at LIMIT ?`+t.s.skipLocked+`)
		RETURNING tenant, send_id, mailbox_id, attempts`, holder, micros(until), micros(now), micros(now), n)
}

// FinishIMAPAppend implements core.Tx.
func (t *Tx) FinishIMAPAppend(ctx context.Context, sendID, holder string) error {
	if _, err := t.q.exec(ctx, `DELETE FROM imap_appends WHERE send_id = ? AND holder = ?`, sendID, holder); err != nil {
		return fmt.Errorf("finish imap append: %w", err)
	}
	return nil
}

// RetryIMAPAppend implements core.Tx.
func (t *Tx) RetryIMAPAppend(ctx context.Context, sendID, holder string, at time.Time) error {
	if _, err := t.q.exec(ctx, `UPDATE imap_appends SET holder = '', lease_until = 0, next_at = ?
		WHERE send_id = ? AND holder = ?`, micros(at), sendID, holder); err != nil {
		return fmt.Errorf("retry imap append: %w", err)
	}
	return nil
}
