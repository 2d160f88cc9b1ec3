package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// The reputation guard's rows (migration 0033): tenant_streams, one row
// per judged stream, and stream_outcomes, each complaint and permanent
// bounce of a bulk send once.

const streamColumns = `tenant, stream, state, changed_at, judge_from`

func scanStream(r rowScanner) (*core.StreamState, error) {
	var (
		st            core.StreamState
		changed, from int64
	)
	err := r.Scan(&st.Tenant, &st.Stream, &st.State, &changed, &from)
	if err != nil {
		return nil, err
	}
	st.ChangedAt = fromMicros(changed)
	if from > 0 {
		st.JudgeFrom = fromMicros(from)
	}
	return &st, nil
}

// StreamState implements core.Store.
func (s *Store) StreamState(ctx context.Context, tenant string, stream core.Stream) (*core.StreamState, error) {
	st, err := scanStream(s.r.queryRow(ctx, `SELECT `+streamColumns+` FROM tenant_streams WHERE tenant = ? AND stream = ?`, tenant, string(stream)))
	if errors.Is(err, sql.ErrNoRows) {
		return &core.StreamState{Tenant: tenant, Stream: stream, State: core.StreamActive}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read stream state: %w", err)
	}
	return st, nil
}

// GuardedStreams implements core.Store.
func (s *Store) GuardedStreams(ctx context.Context, limit int) ([]*core.StreamState, error) {
	return list(ctx, s.r, "list stream states", scanStream, nil,
		`SELECT `+streamColumns+` FROM tenant_streams ORDER BY tenant, stream LIMIT ?`, limit)
}

// streamSendsSQL counts the stream's sends handed off since a time. The
// stream is a literal (one of core.Streams, checked by the caller): for
// bulk the query is one range of the partial index sends_bulk_sent_from, whose
// predicate a bound parameter would not match.
func streamSendsSQL(stream core.Stream) string {
	return `SELECT count(*) FROM sends WHERE tenant = ? AND stream = '` + string(stream) + `' AND sent_at IS NOT NULL AND sent_at >= ?`
}

// refusedKind is the kind the outcome counts give the bulk sends refused
// for good at the handoff (their recipients' servers answered 5xx, so no
// next hop accepted them and they have no sent_at): they count among the
// window's sends, beside those handed off (app.GuardHandoffBounces).
const refusedKind = "refused_sends"

// outcomesSQL counts a window's outcomes grouped by key (o.tenant, a
// bucket of o.at, a From address s.from_addr) and kind, and the sends
// refused at the handoff as refusedKind. The window's outcomes are few:
// joined to their sends. Its arguments are (key's, tenant, stream, since)
// twice.
func outcomesSQL(key string) string {
	const from = ` FROM stream_outcomes o JOIN sends s ON s.id = o.send_id WHERE o.tenant = ? AND o.stream = ? AND o.at >= ?`
	return `SELECT ` + key + `, o.kind, count(*)` + from + ` GROUP BY 1, 2
		UNION ALL SELECT ` + key + `, '` + refusedKind + `', count(DISTINCT o.send_id)` + from +
		` AND o.kind = '` + core.OutcomeBounce + `' AND s.sent_at IS NULL GROUP BY 1`
}

// addOutcome adds n outcomes of kind to c.
func addOutcome(c *core.StreamCounts, kind string, n int) {
	switch kind {
	case core.OutcomeComplaint:
		c.Complaints += n
	case core.OutcomeBounce:
		c.Bounces += n
	case refusedKind:
		c.Sends += n
	}
}

func countStream(ctx context.Context, q querier, p core.StreamWindowParams) (core.StreamCounts, error) {
	var c core.StreamCounts
	if !p.Stream.Valid() {
		return c, fmt.Errorf("count stream: unknown stream %q", p.Stream)
	}
	if err := q.queryRow(ctx, streamSendsSQL(p.Stream), p.Tenant, micros(p.Since)).Scan(&c.Sends); err != nil {
		return c, fmt.Errorf("count stream sends: %w", err)
	}
	w := []any{p.Tenant, string(p.Stream), micros(p.Since)}
	if err := scanGrouped[string](ctx, q, outcomesSQL("o.tenant"), true, append(w, w...), func(_, kind string, n int) {
		addOutcome(&c, kind, n)
	}); err != nil {
		return c, fmt.Errorf("count stream outcomes: %w", err)
	}
	return c, nil
}

// StreamCounts implements core.Store.
func (s *Store) StreamCounts(ctx context.Context, p core.StreamWindowParams) (core.StreamCounts, error) {
	return countStream(ctx, s.r, p)
}

// StreamCounts implements core.Tx.
func (t *Tx) StreamCounts(ctx context.Context, p core.StreamWindowParams) (core.StreamCounts, error) {
	return countStream(ctx, t.q, p)
}

// StreamSeries implements core.Store: two grouped scans of the window,
// the buckets numbered by integer division of the microsecond times.
func (s *Store) StreamSeries(ctx context.Context, p core.StreamWindowParams, step time.Duration) ([]core.StreamBucket, error) {
	if !p.Stream.Valid() || step <= 0 {
		return nil, fmt.Errorf("stream series: bad stream %q or step %v", p.Stream, step)
	}
	since, width := micros(p.Since), step.Microseconds()
	buckets := map[int64]*core.StreamBucket{}
	var order []int64
	at := func(b int64) *core.StreamBucket {
		if buckets[b] == nil {
			buckets[b] = &core.StreamBucket{Start: fromMicros(since + b*width)}
			order = append(order, b)
		}
		return buckets[b]
	}
	// The stream is a literal (it is one of core.Streams): bulk's matches
	// the partial index sends_bulk_sent_from.
	sends := `SELECT (sent_at - ?) / ?, count(*) FROM sends WHERE tenant = ? AND stream = '` + string(p.Stream) + `'
		AND sent_at IS NOT NULL AND sent_at >= ? GROUP BY 1`
	if err := scanGrouped[int64](ctx, s.r, sends, false, []any{since, width, p.Tenant, since}, func(b int64, _ string, n int) {
		at(b).Sends = n
	}); err != nil {
		return nil, err
	}
	w := []any{since, width, p.Tenant, string(p.Stream), since}
	if err := scanGrouped[int64](ctx, s.r, outcomesSQL("(o.at - ?) / ?"), true, append(w, w...), func(b int64, kind string, n int) {
		addOutcome(&at(b).StreamCounts, kind, n)
	}); err != nil {
		return nil, err
	}
	slices.Sort(order)
	out := make([]core.StreamBucket, 0, len(order))
	for _, b := range order {
		out = append(out, *buckets[b])
	}
	return out, nil
}

// scanGrouped runs a grouped count whose rows are (key, count) or (key,
// kind, count): a series' buckets (int64) or senders' addresses (string).
func scanGrouped[K int64 | string](ctx context.Context, q querier, query string, withKind bool, args []any, fn func(key K, kind string, n int)) error {
	rows, err := q.query(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("grouped count: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			key  K
			kind string
			n    int
		)
		dst := []any{&key, &n}
		if withKind {
			dst = []any{&key, &kind, &n}
		}
		if err := rows.Scan(dst...); err != nil {
			return fmt.Errorf("grouped count: %w", err)
		}
		fn(key, kind, n)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("grouped count: %w", err)
	}
	return nil
}

// RecordStreamOutcome implements core.Tx.
func (t *Tx) RecordStreamOutcome(ctx context.Context, o core.StreamOutcome) (bool, error) {
	n, err := t.q.exec(ctx, `INSERT INTO stream_outcomes (send_id, recipient, kind, tenant, stream, at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (send_id, recipient, kind) DO NOTHING`, o.SendID, o.Recipient, o.Kind, o.Tenant, string(o.Stream), micros(o.At))
	if err != nil {
		return false, fmt.Errorf("record stream outcome: %w", err)
	}
	return n == 1, nil
}

// LockStream implements core.Tx. On PostgreSQL the row lock (FOR UPDATE)
// makes a second process's judgement wait for the first to commit, and
// the statements after it (READ COMMITTED) then count the first one's
// outcomes too: two reports that together cross a threshold are not both
// judged short of it. SQLite has one writer at a time.
func (t *Tx) LockStream(ctx context.Context, tenant string, stream core.Stream, now time.Time) (*core.StreamState, error) {
	if _, err := t.q.exec(ctx, `INSERT INTO tenant_streams (tenant, stream, state, changed_at, judge_from) VALUES (?, ?, ?, ?, 0)
		ON CONFLICT (tenant, stream) DO NOTHING`, tenant, string(stream), core.StreamActive, micros(now)); err != nil {
		return nil, fmt.Errorf("lock stream: %w", err)
	}
	st, err := scanStream(t.q.queryRow(ctx, `SELECT `+streamColumns+` FROM tenant_streams WHERE tenant = ? AND stream = ?`+t.s.forUpdate,
		tenant, string(stream)))
	if err != nil {
		return nil, fmt.Errorf("lock stream: %w", err)
	}
	return st, nil
}

// SetStreamState implements core.Tx: the UPDATE's own condition (state
// <> the new one) is the decision; a second process's UPDATE waits for
// the first's row lock, then finds the state changed and matches nothing.
func (t *Tx) SetStreamState(ctx context.Context, tenant string, stream core.Stream, state string, now time.Time) (bool, error) {
	if state != core.StreamActive && state != core.StreamPaused {
		return false, fmt.Errorf("set stream state: unknown state %q", state)
	}
	judgeFrom := `judge_from`
	args := []any{state, micros(now)}
	if state == core.StreamActive {
		judgeFrom = `?`
		args = append(args, micros(now))
	}
	args = append(args, tenant, string(stream), state)
	n, err := t.q.exec(ctx, `UPDATE tenant_streams SET state = ?, changed_at = ?, judge_from = `+judgeFrom+`
		WHERE tenant = ? AND stream = ? AND state <> ?`, args...)
	if err != nil {
		return false, fmt.Errorf("set stream state: %w", err)
	}
	if n == 1 && state == core.StreamActive {
		t.woke = true // its queued bulk sends are claimable again
	}
	return n == 1, nil
}
