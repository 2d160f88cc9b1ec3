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
	raw_message, scheduled_at, attachment_count, stream, trace_parent, unsubscribe`

type rowScanner interface{ Scan(dest ...any) error }

func scanSend(r rowScanner) (*core.Send, error) {
	var (
		s                                            core.Send
		idemKey, templateID, lastError, attemptToken sql.NullString
		inReplyTo, traceParent                       sql.NullString
		to, cc, bcc, replyTo, headers, tags, refs    string
		leaseUntil, sentAt, nextAttempt, scheduledAt sql.NullInt64
		createdAt, updatedAt                         int64
	)
	err := r.Scan(&s.ID, &s.Tenant, &idemKey, &s.MailboxID, &s.Status, &s.From, &to, &cc, &bcc,
		&replyTo, &s.Subject, &s.Text, &s.HTML, &headers, &tags, &templateID, &s.MessageID, &s.Attempts, &lastError,
		&attemptToken, &leaseUntil, &createdAt, &updatedAt, &sentAt, &inReplyTo, &refs, &s.Forward, &s.Tries, &nextAttempt,
		&s.Raw, &scheduledAt, &s.AttachmentCount, &s.Stream, &traceParent, &s.Unsubscribe)
	if err := rowErr("scan send", err); err != nil {
		return nil, err
	}
	s.IdempotencyKey, s.TemplateID, s.LastError, s.AttemptToken = idemKey.String, templateID.String, lastError.String, attemptToken.String
	s.InReplyTo, s.TraceParent = inReplyTo.String, traceParent.String
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

const insertSendHead = `INSERT INTO sends (` + sendColumns + `, ` + sendRecordColumns + `) VALUES `

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
		s.Raw, nullMicros(s.ScheduledAt), len(s.Attachments), string(s.Stream.Or(core.StreamTransactional)), nullString(s.TraceParent), s.Unsubscribe}
	args = append(args, noSendRecord[:]...) // PutIdempotency may fill them in (sendrecord.go)
	s.AttachmentCount = len(s.Attachments)
	t.made = append(t.made, madeSend{id: s.ID, tenant: s.Tenant})
	if t.deferred != nil {
		t.deferred.addSend(s.ID, args)
	} else {
		st := insertStatement(insertSendHead, "", []deferredRow{{args: args}})
		if _, err := t.q.exec(ctx, st.sql, st.args...); err != nil {
			return fmt.Errorf("insert send: %w", err)
		}
	}
	if err := t.insertAddresses(ctx, s); err != nil {
		return err
	}
	if err := t.insertTags(ctx, s); err != nil {
		return err
	}
	return t.insertAttachments(ctx, s)
}

const insertTagHead = `INSERT INTO send_tags (tenant, name, value, send_id) VALUES `

// insertTags indexes the send's tags (send_tags), one statement for all.
func (t *Tx) insertTags(ctx context.Context, s *core.Send) error {
	if len(s.Tags) == 0 {
		return nil
	}
	if t.deferred != nil {
		// Waiting with the send's row, which then still waits for its
		// idempotency record (sendrecord.go).
		for n, v := range s.Tags {
			t.deferred.addTag(s.Tenant, n, v, s.ID)
		}
		return nil
	}
	args := make([]any, 0, 4*len(s.Tags))
	for n, v := range s.Tags {
		args = append(args, s.Tenant, n, v, s.ID)
	}
	q := insertTagHead + `(?, ?, ?, ?)` + strings.Repeat(`, (?, ?, ?, ?)`, len(s.Tags)-1)
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

// Reschedule implements core.Tx.
func (t *Tx) Reschedule(ctx context.Context, id string, at, now time.Time) error {
	return t.execOne(ctx, "reschedule send", `UPDATE sends SET scheduled_at = ?, next_attempt_at = ?, updated_at = ?
		WHERE id = ? AND status = 'scheduled'`, micros(at), micros(at), micros(now), id)
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

// SendForUpdateIn implements core.Tx. PostgreSQL locks only the rows that
// meet the WHERE, and checks it again on a row it had to wait for: a send
// that left those statuses meanwhile is read again, without a lock. One
// that came into them between the two statements (a deferred attempt
// given back to queued, say) is locked after all: the caller changes it,
// and must not on an unlocked read.
func (t *Tx) SendForUpdateIn(ctx context.Context, id string, statuses ...core.Status) (*core.Send, error) {
	if len(statuses) == 0 {
		return scanSend(t.q.queryRow(ctx, `SELECT `+sendColumns+` FROM sends WHERE id = ?`, id))
	}
	args := make([]any, 0, 1+len(statuses))
	args = append(args, id)
	for _, st := range statuses {
		args = append(args, string(st))
	}
	locking := `SELECT ` + sendColumns + ` FROM sends WHERE id = ? AND status IN (?` +
		strings.Repeat(", ?", len(statuses)-1) + `)` + t.s.forUpdate
	for range maxStatusReads {
		s, err := scanSend(t.q.queryRow(ctx, locking, args...))
		if !errors.Is(err, core.ErrNotFound) {
			return s, err
		}
		s, err = scanSend(t.q.queryRow(ctx, `SELECT `+sendColumns+` FROM sends WHERE id = ?`, id))
		if err != nil || !slices.Contains(statuses, s.Status) {
			return s, err
		}
	}
	// Its status keeps moving under us: let the batch run again.
	return nil, core.Conflicted(fmt.Errorf("send %s changed status %d times while being read", id, maxStatusReads))
}

// maxStatusReads bounds SendForUpdateIn's reads of a send whose status
// moves between them.
const maxStatusReads = 5

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
