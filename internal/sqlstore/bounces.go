package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
)

func recipients(ctx context.Context, q querier, sendID string) ([]core.RecipientState, error) {
	return list(ctx, q, "list recipients", func(r rowScanner) (core.RecipientState, error) { return scanRecipient(r) }, nil,
		`SELECT address, status, detail, updated_at FROM send_recipients
		WHERE send_id = ? ORDER BY address`, sendID)
}

// scanRecipient reads a recipient's (address, status, detail, updated_at)
// after the columns lead scans into (fillRecipients' send id).
func scanRecipient(row rowScanner, lead ...any) (core.RecipientState, error) {
	var (
		r  core.RecipientState
		at int64
	)
	if err := row.Scan(append(lead, &r.Address, &r.Status, &r.Detail, &at)...); err != nil {
		return r, fmt.Errorf("scan recipient: %w", err)
	}
	r.UpdatedAt = fromMicros(at)
	return r, nil
}

// Recipients implements core.Tx.
func (t *Tx) Recipients(ctx context.Context, sendID string) ([]core.RecipientState, error) {
	return recipients(ctx, t.q, sendID)
}

// SetRecipient implements core.Tx.
func (t *Tx) SetRecipient(ctx context.Context, sendID string, r core.RecipientState) error {
	_, err := t.q.exec(ctx, `INSERT INTO send_recipients (send_id, address, status, detail, updated_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (send_id, address) DO UPDATE
		SET status = excluded.status, detail = excluded.detail, updated_at = excluded.updated_at`,
		sendID, core.NormalizeAddress(r.Address), r.Status, r.Detail, micros(r.UpdatedAt))
	if err != nil {
		return fmt.Errorf("set recipient: %w", err)
	}
	return nil
}

// RecordReport implements core.Tx.
func (t *Tx) RecordReport(ctx context.Context, p core.ReportParams) (bool, error) {
	n, err := t.q.exec(ctx, `INSERT INTO inbound_reports (digest, tenant, send_id, received_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (digest) DO NOTHING`, p.Digest, p.Tenant, p.SendID, micros(p.At))
	if err != nil {
		return false, fmt.Errorf("record report: %w", err)
	}
	return n == 1, nil
}

const unmatchedColumns = `id, tenant, send_id, mail_from, rcpt_to, reason, raw, received_at, size`

// InsertUnmatched implements core.Tx: at most core.MaxUnmatchedKeep bytes
// of the message are kept.
func (t *Tx) InsertUnmatched(ctx context.Context, u *core.UnmatchedInbound) error {
	raw := u.Raw
	if len(raw) > core.MaxUnmatchedKeep {
		raw = raw[:core.MaxUnmatchedKeep]
	}
	_, err := t.q.exec(ctx, `INSERT INTO inbound_unmatched (`+unmatchedColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		u.ID, u.Tenant, u.SendID, u.MailFrom, u.RcptTo, u.Reason, raw, micros(u.ReceivedAt), len(u.Raw))
	if err != nil {
		return fmt.Errorf("insert unmatched inbound: %w", err)
	}
	return nil
}

// ListUnmatched implements core.Store.
func (s *Store) ListUnmatched(ctx context.Context, tenant string, limit int) ([]*core.UnmatchedInbound, error) {
	// The list shows sizes, never the bytes: reading a hundred stored
	// messages to print their lengths was a stranger's lever.
	return list(ctx, s.r, "list unmatched inbound", scanUnmatched, []*core.UnmatchedInbound{}, `SELECT id, tenant, send_id, mail_from, rcpt_to, reason,
		CASE WHEN size = 0 THEN length(raw) ELSE size END, received_at FROM inbound_unmatched WHERE tenant = ?
		ORDER BY id DESC LIMIT ?`, tenant, limit)
}

func scanUnmatched(r rowScanner) (*core.UnmatchedInbound, error) {
	var (
		u  core.UnmatchedInbound
		at int64
	)
	if err := r.Scan(&u.ID, &u.Tenant, &u.SendID, &u.MailFrom, &u.RcptTo, &u.Reason, &u.Size, &at); err != nil {
		return nil, fmt.Errorf("scan unmatched inbound: %w", err)
	}
	u.ReceivedAt = fromMicros(at)
	return &u, nil
}

// statement.
func (s *Store) fillRecipients(ctx context.Context, sends []*core.Send) error {
	if len(sends) == 0 {
		return nil
	}
	args := make([]any, len(sends))
	byID := make(map[string]*core.Send, len(sends))
	for i, sd := range sends {
		args[i], byID[sd.ID] = sd.ID, sd
	}
	// A row names its send: the recipients go to their sends after the read.
	type sendRecipient struct {
		sendID string
		r      core.RecipientState
	}
	rs, err := list(ctx, s.r, "list recipients", func(row rowScanner) (sendRecipient, error) {
		var sr sendRecipient
		var err error
		sr.r, err = scanRecipient(row, &sr.sendID)
		return sr, err
	}, nil, `SELECT send_id, address, status, detail, updated_at FROM send_recipients
		WHERE send_id IN (?`+strings.Repeat(`, ?`, len(sends)-1)+`)`, args...)
	if err != nil {
		return err
	}
	for _, sr := range rs {
		if sd := byID[sr.sendID]; sd != nil {
			sd.Recipients = append(sd.Recipients, sr.r)
		}
	}
	return nil
}

// purgeInbound deletes report digests and unmatched inbound mail received
// before the cutoff, with the sends they were about: a report about a
// purged send has nothing left to change.
func (s *Store) purgeInbound(ctx context.Context, cutoff int64) error {
	for _, table := range []string{"inbound_reports", "inbound_unmatched"} {
		if _, err := s.w.exec(ctx, `DELETE FROM `+table+` WHERE received_at < ?`, cutoff); err != nil {
			return fmt.Errorf("purge %s: %w", table, err)
		}
	}
	return s.purgeReceived(ctx, cutoff)
}

// purgeReceived deletes received mail past the retention, then what only
// it used: raw bytes no message names, threads left empty and their
// entries. Threads that still hold a newer message stay whole. One
// transaction: the tenants' usage rows (migration 0021) shrink with the
// messages or not at all.
func (s *Store) purgeReceived(ctx context.Context, cutoff int64) error {
	err := s.InTx(ctx, func(tx core.Tx) error {
		q := tx.(*Tx).q
		for _, stmt := range []string{
			`UPDATE received_usage SET messages = messages - d.n, bytes = bytes - d.b
				FROM (SELECT tenant, count(*) AS n, coalesce(sum(size), 0) AS b FROM received_messages
				WHERE received_at < ? GROUP BY tenant) AS d WHERE received_usage.tenant = d.tenant`,
			`DELETE FROM thread_messages WHERE kind = 'received' AND ref_id IN (SELECT id FROM received_messages WHERE received_at < ?)`,
			`DELETE FROM received_messages WHERE received_at < ?`,
			`DELETE FROM received_raw WHERE created_at < ? AND NOT EXISTS (SELECT 1 FROM received_messages m
				WHERE m.tenant = received_raw.tenant AND m.digest = received_raw.digest)`,
			`DELETE FROM threads WHERE last_at < ? AND NOT EXISTS (SELECT 1 FROM received_messages m WHERE m.thread_id = threads.id)`,
			`DELETE FROM thread_messages WHERE at < ? AND NOT EXISTS (SELECT 1 FROM threads t WHERE t.id = thread_messages.thread_id)`,
		} {
			if _, err := q.exec(ctx, stmt, cutoff); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("purge received mail: %w", err)
	}
	return nil
}

// UnmatchedCount implements core.Tx.
func (t *Tx) UnmatchedCount(ctx context.Context, tenant string) (int, error) {
	return queryCount(ctx, t.q, "count unmatched inbound", `SELECT count(*) FROM inbound_unmatched WHERE tenant = ?`, tenant)
}

// ReportCount implements core.Tx.
func (t *Tx) ReportCount(ctx context.Context, sendID string) (int, error) {
	return queryCount(ctx, t.q, "count reports", `SELECT count(*) FROM inbound_reports WHERE send_id = ?`, sendID)
}
