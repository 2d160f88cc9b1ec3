package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sendonce/sendonce/idempotency"
)

// deferRowsSQLite says whether SQLite's batches defer their rows too.
const deferRowsSQLite = true

// deferredRows holds the rows that the transactions of one batch insert
// into sends, send_addresses and send_tags (InsertSend) and idempotency_keys
// (PutIdempotency), so that the
// batch writes each table's rows with one multi-row statement instead of
// one statement per row: on PostgreSQL each statement is a round trip and a
// parse-bind-execute, on SQLite a run through the driver.
//
// The rows are written (flush) before any other statement of the batch runs
// — so every read and update sees them — and before the commit. Only a
// DecideIdempotency on a key that is not among them skips the flush: its
// read cannot see the other rows. The rows are written sorted by primary
// key, so that two processes' batches take their index locks in one order.
//
// A flush that fails (a duplicate send id, say) fails the whole batch run;
// the batch then runs again with savepoints and without deferring, where
// the guilty transaction fails alone. The failure sticks: a later flush
// reports it again, so that no transaction commits past lost rows.
type deferredRows struct {
	sends []deferredRow
	addrs []deferredRow
	tags  []deferredRow
	keys  []deferredRow
	// wide: the scoped keys whose records wait in sends' rows (fillSend).
	wide []string
	err  error
}

// deferredRow is one row's values in column order, with its sort key.
type deferredRow struct {
	key  string
	args []any
}

func scopeKey(sc idempotency.Scope) string {
	return sc.Tenant + "\x00" + sc.Method + "\x00" + sc.Route + "\x00" + sc.Key
}

func (d *deferredRows) addSend(id string, args []any) {
	d.sends = append(d.sends, deferredRow{key: id, args: args})
}

func (d *deferredRows) addAddress(tenant, address, sendID string) {
	d.addrs = append(d.addrs, deferredRow{key: tenant + "\x00" + address + "\x00" + sendID, args: []any{tenant, address, sendID}})
}

func (d *deferredRows) addTag(tenant, name, value, sendID string) {
	d.tags = append(d.tags, deferredRow{key: tenant + "\x00" + name + "\x00" + value + "\x00" + sendID, args: []any{tenant, name, value, sendID}})
}

func (d *deferredRows) addKey(sc idempotency.Scope, args []any) {
	d.keys = append(d.keys, deferredRow{key: scopeKey(sc), args: args})
}

// hasKey reports whether the scoped key's record waits among the rows.
func (d *deferredRows) hasKey(sc idempotency.Scope) bool {
	if d == nil {
		return false
	}
	k := scopeKey(sc)
	return slices.Contains(d.wide, k) || slices.ContainsFunc(d.keys, func(r deferredRow) bool { return r.key == k })
}

// maxRowsPerStatement keeps a multi-row statement's parameters within
// both databases' limits (44 per send row; SQLite allows 32,766, and
// PostgreSQL 65,535).
const maxRowsPerStatement = 256

// statement is one SQL text with its arguments.
type statement struct {
	sql  string
	args []any
	what string // for errors
}

// take returns the statements that write the waiting rows — sends first,
// then their addresses and tags, then the keys; each table's rows sorted — and
// forgets the rows.
func (d *deferredRows) take() []statement {
	if d == nil {
		return nil
	}
	var out []statement
	d.wide = nil
	for _, t := range []struct {
		rows             *[]deferredRow
		what, head, tail string
	}{
		{&d.sends, "send rows", insertSendHead, ""},
		{&d.addrs, "recipient index rows", insertAddressHead, ""},
		{&d.tags, "tag rows", insertTagHead, ""},
		{&d.keys, "idempotency records", putKeyHead, putKeyTail},
	} {
		rows := *t.rows
		if len(rows) == 0 {
			continue
		}
		slices.SortFunc(rows, func(a, b deferredRow) int { return cmp.Compare(a.key, b.key) })
		for chunk := range slices.Chunk(rows, maxRowsPerStatement) {
			st := insertStatement(t.head, t.tail, chunk)
			st.what = t.what
			out = append(out, st)
		}
		*t.rows = nil
	}
	return out
}

// flush writes the waiting rows.
func (d *deferredRows) flush(ctx context.Context, q querier) error {
	if d == nil || d.err != nil {
		return d.errOrNil()
	}
	for _, st := range d.take() {
		if _, err := q.exec(ctx, st.sql, st.args...); err != nil {
			return d.fail(st, err)
		}
	}
	return nil
}

// fail records that st failed: every later flush reports it too.
func (d *deferredRows) fail(st statement, err error) error {
	d.err = fmt.Errorf("write the batch's %s: %w", st.what, err)
	return d.err
}

func (d *deferredRows) errOrNil() error {
	if d == nil {
		return nil
	}
	return d.err
}

// insertStatement is head VALUES (…), (…) tail with the rows' values.
func insertStatement(head, tail string, rows []deferredRow) statement {
	n := len(rows[0].args)
	tuple := "(?" + strings.Repeat(", ?", n-1) + ")"
	var b strings.Builder
	b.Grow(len(head) + len(tail) + len(rows)*(len(tuple)+2))
	b.WriteString(head)
	args := make([]any, 0, n*len(rows))
	for i, r := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(tuple)
		args = append(args, r.args...)
	}
	b.WriteString(tail)
	return statement{sql: b.String(), args: args}
}

// flushingQuerier writes a batch's deferred rows before each statement.
type flushingQuerier struct {
	q querier
	d *deferredRows
}

func (f flushingQuerier) exec(ctx context.Context, s string, args ...any) (int64, error) {
	if err := f.d.flush(ctx, f.q); err != nil {
		return 0, err
	}
	return f.q.exec(ctx, s, args...)
}

func (f flushingQuerier) queryRow(ctx context.Context, s string, args ...any) row {
	if err := f.d.flush(ctx, f.q); err != nil {
		return errRow{err}
	}
	return f.q.queryRow(ctx, s, args...)
}

func (f flushingQuerier) query(ctx context.Context, s string, args ...any) (rows, error) {
	if err := f.d.flush(ctx, f.q); err != nil {
		return nil, err
	}
	return f.q.query(ctx, s, args...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
