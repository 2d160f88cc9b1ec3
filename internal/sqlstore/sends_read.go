package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sendonce/sendonce/internal/core"
)

// SendAttachments implements core.Store.
func (s *Store) SendAttachments(ctx context.Context, id string) ([]core.Attachment, error) {
	return list(ctx, s.r, "read attachments of "+id, func(r rowScanner) (core.Attachment, error) {
		var a core.Attachment
		if err := r.Scan(&a.Filename, &a.ContentType, &a.ContentID, &a.Data); err != nil {
			return a, fmt.Errorf("scan attachment of %s: %w", id, err)
		}
		return a, nil
	}, nil, `SELECT filename, content_type, content_id, data FROM send_attachments
		WHERE send_id = ? ORDER BY idx`, id)
}

// SendRecipients implements core.Store.
func (s *Store) SendRecipients(ctx context.Context, id string) ([]core.RecipientState, error) {
	return recipients(ctx, s.r, id)
}

func collectSends(rows rows) ([]*core.Send, error) {
	return collect(rows, "read sends", scanSend, nil)
}

// Send implements core.Store.
func (s *Store) Send(ctx context.Context, tenant, id string) (*core.Send, error) {
	return scanSend(s.r.queryRow(ctx, `SELECT `+sendColumns+` FROM sends WHERE id = ? AND tenant = ?`, id, tenant))
}

// ListSends implements core.Store: newest first; After continues below a
// cursor.
func (s *Store) ListSends(ctx context.Context, tenant string, f core.SendFilter) ([]*core.Send, string, error) {
	limit := f.Limit
	q, args := listSendsStatement(tenant, f)
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

// byCallerKey finds a tenant's sends by the key as the caller gave it, in
// the two indexes that hold it (migration 0040): sends_idem for a send
// holding its record under that very key, sends_caller_key for every
// other send with a key. A send is in one of them, never both.
const byCallerKey = `id IN (SELECT id FROM sends WHERE tenant = ? AND idem_key = ? AND idempotency_key = idem_key
	UNION ALL SELECT id FROM sends WHERE tenant = ? AND idempotency_key = ? AND idem_key IS DISTINCT FROM idempotency_key)`

// listSendsStatement is the statement ListSends runs for f, with its
// arguments: the filters' conditions and listSendsQuery's order and
// limit. The query plan tests explain this very statement.
func listSendsStatement(tenant string, f core.SendFilter) (string, []any) {
	var (
		where = []string{"tenant = ?"}
		args  = []any{tenant}
	)
	if f.IdempotencyKey != "" {
		where, args = append(where, byCallerKey), append(args, tenant, f.IdempotencyKey, tenant, f.IdempotencyKey)
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
	if f.APIKeyIDs != nil {
		// Never empty: the key that asks shares its own namespace.
		where = append(where, "api_key_id IN ("+strings.TrimSuffix(strings.Repeat("?, ", len(f.APIKeyIDs)), ", ")+")")
		for _, id := range f.APIKeyIDs {
			args = append(args, id)
		}
	}
	if f.Before != "" {
		where, args = append(where, "id > ?"), append(args, f.Before)
	}
	if f.TagName != "" {
		where = append(where, "id IN (SELECT send_id FROM send_tags WHERE tenant = ? AND name = ? AND value = ?)")
		args = append(args, tenant, f.TagName, f.TagValue)
	}
	if f.Recipient != "" {
		where, args = append(where, recipientFilter), append(args, tenant, f.Recipient)
	}
	if !f.CreatedAfter.IsZero() {
		where, args = append(where, "created_at > ?"), append(args, micros(f.CreatedAfter))
	}
	if !f.CreatedBefore.IsZero() {
		where, args = append(where, "created_at < ?"), append(args, micros(f.CreatedBefore))
	}
	return listSendsQuery(where, args, f, f.Limit)
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
		if err = providerOf(ctx, q, send); err != nil {
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
	return list(ctx, q, "list events", scanEvent, []core.Event{}, `SELECT e.type, e.at, e.detail, e.uid, e.recipient, e.bounce, e.id FROM send_events e
		JOIN sends s ON s.id = e.send_id WHERE e.send_id = ? AND s.tenant = ? ORDER BY e.id`, id, tenant)
}

func scanEvent(r rowScanner) (core.Event, error) {
	var (
		e      core.Event
		at, n  int64
		bounce string
	)
	err := r.Scan(&e.Type, &at, &e.Detail, &e.ID, &e.Recipient, &bounce, &n)
	if err != nil {
		return e, fmt.Errorf("scan event: %w", err)
	}
	e.At = fromMicros(at)
	if e.ID == "" { // written before events had ids (migration 0008)
		e.ID = fmt.Sprintf("evt_legacy_%d", n)
	}
	if e.Bounce, err = decodeBounce(bounce); err != nil {
		return e, err
	}
	return e, nil
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
