package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
)

// threadSelect reads a thread with its aggregates: messages of both kinds,
// unread received ones, whether one has attachments, and the latest
// received message's sender and recipients.
const threadSelect = `SELECT t.id, t.tenant, t.mailbox_id, t.subject, t.subject_key, t.folder, t.labels, t.last_at, t.created_at,
	(SELECT count(*) FROM thread_messages tm WHERE tm.thread_id = t.id),
	(SELECT count(*) FROM received_messages r WHERE r.thread_id = t.id AND r.is_read = ?),
	(SELECT count(*) FROM received_messages r WHERE r.thread_id = t.id AND r.attachments <> '[]'),
	coalesce((SELECT r.from_addr FROM received_messages r WHERE r.thread_id = t.id ORDER BY r.id DESC LIMIT 1), ''),
	coalesce((SELECT r.to_addrs FROM received_messages r WHERE r.thread_id = t.id ORDER BY r.id DESC LIMIT 1), '[]'),
	coalesce((SELECT r.cc_addrs FROM received_messages r WHERE r.thread_id = t.id ORDER BY r.id DESC LIMIT 1), '[]')
	FROM threads t`

func scanThread(r rowScanner) (*core.Thread, error) {
	var (
		t              core.Thread
		labels, to, cc string
		last, created  int64
		withAtt        int
	)
	err := r.Scan(&t.ID, &t.Tenant, &t.MailboxID, &t.Subject, &t.SubjectKey, &t.Folder, &labels, &last, &created,
		&t.Messages, &t.Unread, &withAtt, &t.From, &to, &cc)
	if err := rowErr("scan thread", err); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		src string
		dst *[]string
	}{{labels, &t.Labels}, {to, &t.To}, {cc, &t.Cc}} {
		if err := json.Unmarshal([]byte(f.src), f.dst); err != nil {
			return nil, fmt.Errorf("decode thread %s: %w", t.ID, err)
		}
	}
	t.LastAt, t.CreatedAt, t.HasAttachment = fromMicros(last), fromMicros(created), withAtt > 0
	return &t, nil
}

// Thread implements core.Receiving.
func (s *Store) Thread(ctx context.Context, tenant, id string) (*core.Thread, error) {
	return scanThread(s.r.queryRow(ctx, threadSelect+` WHERE t.tenant = ? AND t.id = ?`, false, tenant, id))
}

// ListThreads implements core.Receiving: most recent activity first; the
// cursor is the last thread of the previous page.
func (s *Store) ListThreads(ctx context.Context, tenant string, f core.ThreadFilter) ([]*core.Thread, bool, error) {
	where, args := []string{"t.tenant = ?"}, []any{false, tenant}
	in := func(col string, vs []string) {
		if len(vs) > 0 {
			where = append(where, col+" IN (?"+strings.Repeat(", ?", len(vs)-1)+")")
			for _, v := range vs {
				args = append(args, v)
			}
		}
	}
	in("t.mailbox_id", f.MailboxIDs)
	in("t.folder", f.Folders)
	if f.Label != "" {
		where, args = append(where, "t.labels LIKE ?"), append(args, `%"`+likeEscape(f.Label)+`"%`)
	}
	if f.Read != nil {
		cond := "NOT EXISTS"
		if !*f.Read {
			cond = "EXISTS"
		}
		where, args = append(where, cond+" (SELECT 1 FROM received_messages r WHERE r.thread_id = t.id AND r.is_read = ?)"), append(args, false)
	}
	if f.Query != "" {
		q := "%" + likeEscape(strings.ToLower(f.Query)) + "%"
		where = append(where, "(lower(t.subject) LIKE ? OR EXISTS (SELECT 1 FROM received_messages r WHERE r.thread_id = t.id AND (lower(r.from_addr) LIKE ? OR lower(r.text_body) LIKE ?)))")
		args = append(args, q, q, q)
	}
	if f.After != "" {
		where = append(where, "(t.last_at, t.id) < (SELECT last_at, id FROM threads WHERE tenant = ? AND id = ?)")
		args = append(args, tenant, f.After)
	}
	return listPage(ctx, s.r, "list threads", scanThread, []*core.Thread{}, f.Limit,
		threadSelect+` WHERE `+strings.Join(where, " AND ")+` ORDER BY t.last_at DESC, t.id DESC LIMIT ?`, args...)
}

// ThreadItems implements core.Receiving.
func (s *Store) ThreadItems(ctx context.Context, tenant, threadID string) ([]core.ThreadItem, error) {
	return list(ctx, s.r, "thread items", func(r rowScanner) (core.ThreadItem, error) {
		var (
			it core.ThreadItem
			at int64
		)
		err := r.Scan(&it.Kind, &it.ID, &it.MessageID, &at)
		it.At = fromMicros(at)
		return it, err
	}, []core.ThreadItem{}, `SELECT kind, ref_id, message_id, at FROM thread_messages
		WHERE tenant = ? AND thread_id = ? ORDER BY at, ref_id`, tenant, threadID)
}

// ThreadOfMessageIDs implements core.ReceivingTx.
func (t *Tx) ThreadOfMessageIDs(ctx context.Context, tenant string, ids []string) (string, error) {
	if len(ids) == 0 {
		return "", core.ErrNotFound
	}
	args := []any{tenant}
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := t.q.query(ctx, `SELECT message_id, thread_id FROM thread_messages
		WHERE tenant = ? AND message_id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`, args...)
	if err != nil {
		return "", fmt.Errorf("thread of message ids: %w", err)
	}
	defer rows.Close()
	found := map[string]string{}
	for rows.Next() {
		var mid, thread string
		if err := rows.Scan(&mid, &thread); err != nil {
			return "", fmt.Errorf("thread of message ids: %w", err)
		}
		found[mid] = thread
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("thread of message ids: %w", err)
	}
	for i := len(ids) - 1; i >= 0; i-- {
		if th, ok := found[ids[i]]; ok {
			return th, nil
		}
	}
	return "", core.ErrNotFound
}

// InsertThread implements core.ReceivingTx.
func (t *Tx) InsertThread(ctx context.Context, th *core.Thread) error {
	_, err := t.q.exec(ctx, `INSERT INTO threads (id, tenant, mailbox_id, subject, subject_key, folder, labels, last_at, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, th.ID, th.Tenant, th.MailboxID, th.Subject, th.SubjectKey, th.Folder,
		jsonText(nonNil(th.Labels)), micros(th.LastAt), micros(th.CreatedAt))
	if err != nil {
		return fmt.Errorf("insert thread: %w", err)
	}
	return nil
}

// AddThreadItem implements core.ReceivingTx. A received message brings a
// thread out of the archive (as mail clients do); trash and spam stay.
func (t *Tx) AddThreadItem(ctx context.Context, tenant, threadID string, it core.ThreadItem) error {
	if _, err := t.q.exec(ctx, `INSERT INTO thread_messages (tenant, thread_id, message_id, kind, ref_id, at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (thread_id, kind, ref_id) DO NOTHING`,
		tenant, threadID, it.MessageID, it.Kind, it.ID, micros(it.At)); err != nil {
		return fmt.Errorf("add thread item: %w", err)
	}
	folder := "folder"
	if it.Kind == core.ThreadReceived {
		folder = "CASE WHEN folder = 'archive' THEN 'inbox' ELSE folder END"
	}
	if _, err := t.q.exec(ctx, `UPDATE threads SET last_at = CASE WHEN last_at < ? THEN ? ELSE last_at END, folder = `+folder+`
		WHERE tenant = ? AND id = ?`, micros(it.At), micros(it.At), tenant, threadID); err != nil {
		return fmt.Errorf("touch thread: %w", err)
	}
	return nil
}

// UpdateThread implements core.ReceivingTx.
func (t *Tx) UpdateThread(ctx context.Context, th *core.Thread) error {
	return t.execOne(ctx, "update thread", `UPDATE threads SET folder = ?, labels = ? WHERE tenant = ? AND id = ?`,
		th.Folder, jsonText(nonNil(th.Labels)), th.Tenant, th.ID)
}

// SetThreadRead implements core.ReceivingTx.
func (t *Tx) SetThreadRead(ctx context.Context, tenant, threadID string, read bool) error {
	if _, err := t.q.exec(ctx, `UPDATE received_messages SET is_read = ? WHERE tenant = ? AND thread_id = ?`, read, tenant, threadID); err != nil {
		return fmt.Errorf("mark thread: %w", err)
	}
	return nil
}

// DeleteThread implements core.ReceivingTx: the thread, its messages and
// the raw bytes no other message of the tenant shares.
func (t *Tx) DeleteThread(ctx context.Context, tenant, id string) error {
	if err := t.execOne(ctx, "delete thread", `DELETE FROM threads WHERE tenant = ? AND id = ?`, tenant, id); err != nil {
		return err
	}
	// What the tenant keeps shrinks by the thread's messages (their count
	// and sizes: migration 0021), and the raw bytes they named go unless
	// another message of the tenant names them too.
	if _, err := t.q.exec(ctx, `UPDATE received_usage SET messages = messages - d.n, bytes = bytes - d.b
		FROM (SELECT count(*) AS n, coalesce(sum(size), 0) AS b FROM received_messages
		WHERE tenant = ? AND thread_id = ?) AS d WHERE received_usage.tenant = ?`, tenant, id, tenant); err != nil {
		return fmt.Errorf("delete thread: %w", err)
	}
	digests, err := t.threadDigests(ctx, tenant, id)
	if err != nil {
		return err
	}
	for _, q := range []string{
		`DELETE FROM thread_messages WHERE tenant = ? AND thread_id = ?`,
		`DELETE FROM received_messages WHERE tenant = ? AND thread_id = ?`,
	} {
		if _, err := t.q.exec(ctx, q, tenant, id); err != nil {
			return fmt.Errorf("delete thread: %w", err)
		}
	}
	for _, d := range digests {
		if _, err := t.q.exec(ctx, `DELETE FROM received_raw WHERE tenant = ? AND digest = ? AND NOT EXISTS
			(SELECT 1 FROM received_messages m WHERE m.tenant = ? AND m.digest = ?)`, tenant, d, tenant, d); err != nil {
			return fmt.Errorf("delete thread: %w", err)
		}
	}
	return nil
}

// threadDigests lists the raw bytes a thread's received messages name.
func (t *Tx) threadDigests(ctx context.Context, tenant, id string) ([]string, error) {
	return list(ctx, t.q, "delete thread", func(r rowScanner) (string, error) {
		d, err := scanString(r)
		if err != nil {
			return "", fmt.Errorf("delete thread: %w", err)
		}
		return d, nil
	}, nil, `SELECT DISTINCT digest FROM received_messages WHERE tenant = ? AND thread_id = ?`, tenant, id)
}
