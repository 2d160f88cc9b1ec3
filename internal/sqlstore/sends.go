package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

const sendColumns = `id, tenant, idempotency_key, mailbox_id, status, from_addr, to_addrs, cc_addrs, bcc_addrs,
	reply_to, subject, text_body, html_body, headers, tags, template_id, message_id, attempts, last_error,
	attempt_token, lease_until, created_at, updated_at, sent_at, in_reply_to, refs, forward_raw, tries, next_attempt_at,
	raw_message, scheduled_at, attachment_count`

type rowScanner interface{ Scan(dest ...any) error }

func scanSend(r rowScanner) (*core.Send, error) {
	var (
		s                                            core.Send
		idemKey, templateID, lastError, attemptToken sql.NullString
		inReplyTo                                    sql.NullString
		to, cc, bcc, replyTo, headers, tags, refs    string
		leaseUntil, sentAt, nextAttempt, scheduledAt sql.NullInt64
		createdAt, updatedAt                         int64
	)
	err := r.Scan(&s.ID, &s.Tenant, &idemKey, &s.MailboxID, &s.Status, &s.From, &to, &cc, &bcc,
		&replyTo, &s.Subject, &s.Text, &s.HTML, &headers, &tags, &templateID, &s.MessageID, &s.Attempts, &lastError,
		&attemptToken, &leaseUntil, &createdAt, &updatedAt, &sentAt, &inReplyTo, &refs, &s.Forward, &s.Tries, &nextAttempt,
		&s.Raw, &scheduledAt, &s.AttachmentCount)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, core.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("scan send: %w", err)
	}
	s.IdempotencyKey, s.TemplateID, s.LastError, s.AttemptToken = idemKey.String, templateID.String, lastError.String, attemptToken.String
	s.InReplyTo = inReplyTo.String
	s.LeaseUntil, s.SentAt, s.NextAttemptAt = fromNullMicros(leaseUntil), fromNullMicros(sentAt), fromNullMicros(nextAttempt)
	s.CreatedAt, s.UpdatedAt = fromMicros(createdAt), fromMicros(updatedAt)
	s.ScheduledAt = fromNullMicros(scheduledAt)
	for _, f := range []struct {
		src string
		dst any
	}{{to, &s.To}, {cc, &s.Cc}, {bcc, &s.Bcc}, {replyTo, &s.ReplyTo}, {headers, &s.Headers}, {tags, &s.Tags}, {refs, &s.References}} {
		if err := json.Unmarshal([]byte(f.src), f.dst); err != nil {
			return nil, fmt.Errorf("decode send %s: %w", s.ID, err)
		}
	}
	return &s, nil
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only strings, slices and maps of strings reach here.
		panic(fmt.Sprintf("sqlstore: marshal %T: %v", v, err))
	}
	return string(b)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

const insertSendHead = `INSERT INTO sends (` + sendColumns + `) VALUES `

// InsertSend implements core.Tx. In a batch the row waits for the batch's
// multi-row insert (deferredRows).
func (t *Tx) InsertSend(ctx context.Context, s *core.Send) error {
	tags := s.Tags
	if tags == nil {
		tags = map[string]string{}
	}
	args := []any{s.ID, s.Tenant, nullString(s.IdempotencyKey), s.MailboxID, s.Status, s.From,
		jsonText(nonNil(s.To)), jsonText(nonNil(s.Cc)), jsonText(nonNil(s.Bcc)), jsonText(nonNil(s.ReplyTo)),
		s.Subject, s.Text, s.HTML, jsonText(nonNil(s.Headers)), jsonText(tags), nullString(s.TemplateID), s.MessageID,
		s.Attempts, nullString(s.LastError), nullString(s.AttemptToken), nullMicros(s.LeaseUntil),
		micros(s.CreatedAt), micros(s.UpdatedAt), nullMicros(s.SentAt),
		nullString(s.InReplyTo), jsonText(nonNil(s.References)), s.Forward, s.Tries, t.due(s),
		s.Raw, nullMicros(s.ScheduledAt), len(s.Attachments)}
	s.AttachmentCount = len(s.Attachments)
	if t.deferred != nil {
		t.deferred.addSend(s.ID, args)
	} else {
		st := insertStatement(insertSendHead, "", []deferredRow{{args: args}})
		if _, err := t.q.exec(ctx, st.sql, st.args...); err != nil {
			return fmt.Errorf("insert send: %w", err)
		}
	}
	if err := t.insertTags(ctx, s); err != nil {
		return err
	}
	return t.insertAttachments(ctx, s)
}

// insertTags indexes the send's tags (send_tags), one statement for all.
func (t *Tx) insertTags(ctx context.Context, s *core.Send) error {
	if len(s.Tags) == 0 {
		return nil
	}
	args := make([]any, 0, 4*len(s.Tags))
	for n, v := range s.Tags {
		args = append(args, s.Tenant, n, v, s.ID)
	}
	q := `INSERT INTO send_tags (tenant, name, value, send_id) VALUES (?, ?, ?, ?)` + strings.Repeat(`, (?, ?, ?, ?)`, len(s.Tags)-1)
	if _, err := t.q.exec(ctx, q, args...); err != nil {
		return fmt.Errorf("insert tags of %s: %w", s.ID, err)
	}
	return nil
}

// insertAttachments writes a send's files, one row each (a statement of
// its own flushes a batch's deferred send rows first, so the row it
// references exists).
func (t *Tx) insertAttachments(ctx context.Context, s *core.Send) error {
	for i, a := range s.Attachments {
		if _, err := t.q.exec(ctx, `INSERT INTO send_attachments (send_id, idx, filename, content_type, content_id, data)
			VALUES (?, ?, ?, ?, ?, ?)`, s.ID, i, a.Filename, a.ContentType, a.ContentID, a.Data); err != nil {
			return fmt.Errorf("insert attachment %d of %s: %w", i, s.ID, err)
		}
	}
	return nil
}

// SendAttachments implements core.Store.
func (s *Store) SendAttachments(ctx context.Context, id string) ([]core.Attachment, error) {
	rows, err := s.r.query(ctx, `SELECT filename, content_type, content_id, data FROM send_attachments
		WHERE send_id = ? ORDER BY idx`, id)
	if err != nil {
		return nil, fmt.Errorf("read attachments of %s: %w", id, err)
	}
	defer rows.Close()
	var out []core.Attachment
	for rows.Next() {
		var a core.Attachment
		if err := rows.Scan(&a.Filename, &a.ContentType, &a.ContentID, &a.Data); err != nil {
			return nil, fmt.Errorf("scan attachment of %s: %w", id, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read attachments of %s: %w", id, err)
	}
	return out, nil
}

// Reschedule implements core.Tx.
func (t *Tx) Reschedule(ctx context.Context, id string, at, now time.Time) error {
	n, err := t.q.exec(ctx, `UPDATE sends SET scheduled_at = ?, next_attempt_at = ?, updated_at = ?
		WHERE id = ? AND status = 'scheduled'`, micros(at), micros(at), micros(now), id)
	if err != nil {
		return fmt.Errorf("reschedule send: %w", err)
	}
	if n != 1 {
		return core.ErrNotFound
	}
	return nil
}

// due is the next_attempt_at to store for s: a queued send without one is
// due at once. Writing a due send wakes this process's claimer after the
// commit.
func (t *Tx) due(s *core.Send) sql.NullInt64 {
	if s.Status != core.StatusQueued {
		return nullMicros(s.NextAttemptAt)
	}
	if s.NextAttemptAt == nil {
		at := s.UpdatedAt
		s.NextAttemptAt = &at
	}
	if !s.NextAttemptAt.After(s.UpdatedAt) {
		t.woke = true // due now; a retry later is found by the poll
	}
	return nullMicros(s.NextAttemptAt)
}

// SendForUpdate implements core.Tx: the row stays locked until the
// transaction ends (SQLite's write transaction excludes other writers
// anyway).
func (t *Tx) SendForUpdate(ctx context.Context, id string) (*core.Send, error) {
	return scanSend(t.q.queryRow(ctx, `SELECT `+sendColumns+` FROM sends WHERE id = ?`+t.s.forUpdate, id))
}

// UpdateSend implements core.Tx.
func (t *Tx) UpdateSend(ctx context.Context, s *core.Send) error {
	n, err := t.q.exec(ctx, `UPDATE sends SET status = ?, attempts = ?, last_error = ?, attempt_token = ?,
		lease_until = ?, updated_at = ?, sent_at = ?, tries = ?, next_attempt_at = ? WHERE id = ?`,
		s.Status, s.Attempts, nullString(s.LastError), nullString(s.AttemptToken), nullMicros(s.LeaseUntil),
		micros(s.UpdatedAt), nullMicros(s.SentAt), s.Tries, t.due(s), s.ID)
	if err != nil {
		return fmt.Errorf("update send: %w", err)
	}
	if n != 1 {
		return core.ErrNotFound
	}
	return nil
}

// UpdateAttempt implements core.Tx.
func (t *Tx) UpdateAttempt(ctx context.Context, s *core.Send, token string) (bool, error) {
	n, err := t.q.exec(ctx, `UPDATE sends SET status = ?, attempts = ?, last_error = ?, attempt_token = ?,
		lease_until = ?, updated_at = ?, sent_at = ?, tries = ?, next_attempt_at = ?
		WHERE id = ? AND attempt_token = ? AND status = 'sending'`,
		s.Status, s.Attempts, nullString(s.LastError), nullString(s.AttemptToken), nullMicros(s.LeaseUntil),
		micros(s.UpdatedAt), nullMicros(s.SentAt), s.Tries, t.due(s), s.ID, token)
	if err != nil {
		return false, fmt.Errorf("record attempt: %w", err)
	}
	return n == 1, nil
}

// AddEvent implements core.Tx: one statement for all of them.
func (t *Tx) AddEvent(ctx context.Context, sendID string, events ...core.Event) error {
	if len(events) == 0 {
		return nil
	}
	args := make([]any, 0, 7*len(events))
	for i := range events {
		e := &events[i]
		if e.ID == "" {
			e.ID = newEventID(e.At)
		}
		bounce, err := encodeBounce(e.Bounce)
		if err != nil {
			return err
		}
		args = append(args, sendID, e.Type, micros(e.At), e.Detail, e.ID, e.Recipient, bounce)
	}
	q := `INSERT INTO send_events (send_id, type, at, detail, uid, recipient, bounce) VALUES (?, ?, ?, ?, ?, ?, ?)` +
		strings.Repeat(`, (?, ?, ?, ?, ?, ?, ?)`, len(events)-1)
	if t.s.dialect == Postgres && anyWebhookEvent(events) {
		// One round trip for the events and their deliveries.
		return t.addEventsQueued(ctx, sendID, q, args)
	}
	if _, err := t.q.exec(ctx, q, args...); err != nil {
		return fmt.Errorf("add event: %w", err)
	}
	return t.queueWebhooks(ctx, sendID, events)
}

// ClaimDue implements core.Tx: one statement claims the batch.
func (t *Tx) ClaimDue(ctx context.Context, p core.ClaimParams) ([]*core.Send, error) {
	now, lease, token, limit := p.Now, p.LeaseUntil, p.Token, p.Limit
	// A scheduled send is queued from its time on (API contract, section
	// 9); the partial index makes this a look at an empty range when none
	// is due.
	if _, err := t.q.exec(ctx, `UPDATE sends SET status = 'queued', updated_at = ?
		WHERE status = 'scheduled' AND next_attempt_at <= ?`, micros(now), micros(now)); err != nil {
		return nil, fmt.Errorf("queue scheduled sends: %w", err)
	}
	rows, err := t.q.query(ctx, `UPDATE sends SET status = 'sending', attempt_token = ?, lease_until = ?,
		tries = tries + 1, next_attempt_at = NULL, updated_at = ?
		WHERE id IN (SELECT id FROM sends WHERE status = 'queued' AND next_attempt_at <= ?
			ORDER BY next_attempt_at LIMIT ?`+t.s.skipLocked+`)
		RETURNING `+sendColumns, token, micros(lease), micros(now), micros(now), limit)
	if err != nil {
		return nil, fmt.Errorf("claim due sends: %w", err)
	}
	return collectSends(rows)
}

// ExpiredAttempts implements core.Tx.
func (t *Tx) ExpiredAttempts(ctx context.Context, now time.Time, limit int) ([]*core.Send, error) {
	rows, err := t.q.query(ctx, `SELECT `+sendColumns+` FROM sends
		WHERE status = 'sending' AND lease_until < ? ORDER BY lease_until LIMIT ?`+t.s.skipLocked, micros(now), limit)
	if err != nil {
		return nil, fmt.Errorf("expired attempts: %w", err)
	}
	return collectSends(rows)
}

func collectSends(rows rows) ([]*core.Send, error) {
	defer rows.Close()
	var out []*core.Send
	for rows.Next() {
		s, err := scanSend(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read sends: %w", err)
	}
	return out, nil
}

// Send implements core.Store.
func (s *Store) Send(ctx context.Context, tenant, id string) (*core.Send, error) {
	return scanSend(s.r.queryRow(ctx, `SELECT `+sendColumns+` FROM sends WHERE id = ? AND tenant = ?`, id, tenant))
}

// ListSends implements core.Store: newest first; After continues below a
// cursor.
func (s *Store) ListSends(ctx context.Context, tenant string, f core.SendFilter) ([]*core.Send, string, error) {
	var (
		where = []string{"tenant = ?"}
		args  = []any{tenant}
	)
	if f.IdempotencyKey != "" {
		where, args = append(where, "idempotency_key = ?"), append(args, f.IdempotencyKey)
	}
	if f.Status != "" {
		where, args = append(where, "status = ?"), append(args, f.Status)
	}
	if f.After != "" {
		where, args = append(where, "id < ?"), append(args, f.After)
	}
	if f.APIKeyID != "" {
		where, args = append(where, "api_key_id = ?"), append(args, f.APIKeyID)
	}
	if f.Before != "" {
		where, args = append(where, "id > ?"), append(args, f.Before)
	}
	if f.TagName != "" {
		where = append(where, "id IN (SELECT send_id FROM send_tags WHERE tenant = ? AND name = ? AND value = ?)")
		args = append(args, tenant, f.TagName, f.TagValue)
	}
	if !f.CreatedAfter.IsZero() {
		where, args = append(where, "created_at > ?"), append(args, micros(f.CreatedAfter))
	}
	if !f.CreatedBefore.IsZero() {
		where, args = append(where, "created_at < ?"), append(args, micros(f.CreatedBefore))
	}
	limit := f.Limit
	q, args := listSendsQuery(where, args, f, limit)
	rows, err := s.r.query(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list sends: %w", err)
	}
	sends, err := collectSends(rows)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(sends) > limit {
		sends = sends[:limit]
		next = sends[limit-1].ID
	}
	if f.Before != "" {
		slices.Reverse(sends) // read oldest first, from just above the cursor
	}
	if err := s.fillRecipients(ctx, sends); err != nil {
		return nil, "", err
	}
	return sends, next, nil
}

// listSendsQuery is ListSends' statement. By key, the order is an
// expression: one key has one send (a few once its key expired and was
// used again), so the key's index finds them and the handful is sorted;
// ordering by the bare id let SQLite, which keeps no statistics here,
// walk every send of the tenant down the (tenant, id) index instead — 3 to
// 4 seconds a lookup at 340,000 sends (found by the soak).
func listSendsQuery(where []string, args []any, f core.SendFilter, limit int) (string, []any) {
	order := "id DESC"
	switch {
	case f.IdempotencyKey != "":
		order = "id || '' DESC"
	case f.Before != "":
		order = "id ASC" // the sends just above the cursor; ListSends turns them round
	}
	return `SELECT ` + sendColumns + ` FROM sends WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY ` + order + ` LIMIT ?`, append(args, limit+1)
}

// SendWithEvents returns the tenant's send and its events as of one moment:
// both are read in one read transaction, so the events never tell of a
// change the send's fields do not show yet (or the other way round).
// ErrNotFound.
func (s *Store) SendWithEvents(ctx context.Context, tenant, id string) (*core.Send, []core.Event, error) {
	var (
		send   *core.Send
		events []core.Event
	)
	err := s.readTx(ctx, func(q querier) error {
		var err error
		if send, err = scanSend(q.queryRow(ctx, `SELECT `+sendColumns+` FROM sends WHERE id = ? AND tenant = ?`, id, tenant)); err != nil {
			return err
		}
		if send.Recipients, err = recipients(ctx, q, id); err != nil {
			return err
		}
		events, err = sendEvents(ctx, q, tenant, id)
		events = withCreation(send, events)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return send, events, nil
}

func sendEvents(ctx context.Context, q querier, tenant, id string) ([]core.Event, error) {
	rows, err := q.query(ctx, `SELECT e.type, e.at, e.detail, e.uid, e.recipient, e.bounce, e.id FROM send_events e
		JOIN sends s ON s.id = e.send_id WHERE e.send_id = ? AND s.tenant = ? ORDER BY e.id`, id, tenant)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	out := []core.Event{}
	for rows.Next() {
		var (
			e      core.Event
			at, n  int64
			bounce string
		)
		if err := rows.Scan(&e.Type, &at, &e.Detail, &e.ID, &e.Recipient, &bounce, &n); err != nil {
			return nil, fmt.Errorf("scan event: %w", err)
		}
		e.At = fromMicros(at)
		if e.ID == "" { // written before events had ids (migration 0008)
			e.ID = fmt.Sprintf("evt_legacy_%d", n)
		}
		if e.Bounce, err = decodeBounce(bounce); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}

// withCreation puts the send's creation first in its history: a queued
// send's acceptance is its row (AcceptSend writes no event for it). Its id
// is the send id's ULID (the send's creation time), stable on every read.
func withCreation(s *core.Send, events []core.Event) []core.Event {
	if len(events) > 0 && events[0].Type == core.EventAccepted {
		return events
	}
	id := "evt_" + strings.TrimPrefix(s.ID, "snd_")
	return append([]core.Event{{ID: id, Type: core.EventAccepted, At: s.CreatedAt, Detail: string(core.StatusQueued)}}, events...)
}

// QueueDepth implements core.Store.
func (s *Store) QueueDepth(ctx context.Context) (int, error) {
	var n int
	if err := s.r.queryRow(ctx, `SELECT count(*) FROM sends WHERE status IN ('queued', 'sending')`).Scan(&n); err != nil {
		return 0, fmt.Errorf("queue depth: %w", err)
	}
	return n, nil
}

// finishedStatuses are those PurgeSends may delete.
const finishedStatuses = `('sent', 'failed', 'canceled', 'delivered', 'bounced', 'complained', 'suppressed')`

// PurgeSends implements core.Store. Sends that still need attention
// (queued, sending, pending_approval, unknown) are kept however old.
func (s *Store) PurgeSends(ctx context.Context, before time.Time) (int, error) {
	cutoff := micros(before)
	if _, err := s.w.exec(ctx, `DELETE FROM inbox_messages WHERE send_id IN (SELECT id FROM sends
		WHERE created_at < ? AND status IN `+finishedStatuses+`)`, cutoff); err != nil {
		return 0, fmt.Errorf("purge captured messages: %w", err)
	}
	n, err := s.w.exec(ctx, `DELETE FROM sends WHERE created_at < ? AND status IN `+finishedStatuses, cutoff)
	if err != nil {
		return 0, fmt.Errorf("purge sends: %w", err)
	}
	if err := s.purgeInbound(ctx, cutoff); err != nil {
		return 0, err
	}
	return int(n), nil
}
