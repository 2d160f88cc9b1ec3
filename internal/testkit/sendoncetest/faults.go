package sendoncetest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var faultSeq atomic.Int64

// FailWrites makes the database itself refuse every INSERT and UPDATE of
// table — a trigger that raises, as a broken disk or a database that went
// away would answer — until the returned function is called (it is also
// called at cleanup). Statements the trigger refuses fail inside sendonce's
// own transactions, so whatever they belong to rolls back as it would on a
// real failure.
func (e *Env) FailWrites(t testing.TB, table string) (restore func()) {
	t.Helper()
	return e.failOps(t, table, "", "INSERT", "UPDATE")
}

// FailStoredAnswers makes the database refuse every write of a stored
// idempotent answer — into a send's row (the record columns set) or into
// idempotency_keys — while the send rows themselves still go in.
func (e *Env) FailStoredAnswers(t testing.TB) (restore func()) {
	t.Helper()
	inSends := e.failOps(t, "sends", "NEW.idem_key IS NOT NULL", "INSERT", "UPDATE")
	inKeys := e.failOps(t, "idempotency_keys", "", "INSERT", "UPDATE")
	return func() { inSends(); inKeys() }
}

// FailUpdates is FailWrites for UPDATEs alone: new rows still go in.
func (e *Env) FailUpdates(t testing.TB, table string) (restore func()) {
	t.Helper()
	return e.failOps(t, table, "", "UPDATE")
}

// failOps refuses ops on table, for the rows when holds of (all when "").
func (e *Env) failOps(t testing.TB, table, when string, ops ...string) (restore func()) {
	t.Helper()
	pgWhen, liteWhen := "", ""
	if when != "" {
		pgWhen, liteWhen = " WHEN ("+when+")", " WHEN "+when
	}
	name := fmt.Sprintf("sendoncetest_fail_%s_%d", table, faultSeq.Add(1))
	var create, drop []string
	if e.Server.Store.PG != nil {
		create = []string{
			`CREATE OR REPLACE FUNCTION ` + name + `() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RAISE EXCEPTION ''injected fault''; END'`,
			`CREATE TRIGGER ` + name + ` BEFORE ` + strings.Join(ops, " OR ") + ` ON ` + table + ` FOR EACH ROW` + pgWhen + ` EXECUTE FUNCTION ` + name + `()`,
		}
		drop = []string{`DROP TRIGGER IF EXISTS ` + name + ` ON ` + table, `DROP FUNCTION IF EXISTS ` + name + `()`}
	} else {
		for _, op := range ops {
			create = append(create, `CREATE TRIGGER `+name+`_`+op+` BEFORE `+op+` ON `+table+liteWhen+
				` BEGIN SELECT RAISE(ABORT, 'injected fault'); END`)
			drop = append(drop, `DROP TRIGGER IF EXISTS `+name+`_`+op)
		}
	}
	for _, q := range create {
		e.Exec(t, q)
	}
	done := false
	restore = func() {
		if done {
			return
		}
		done = true
		for _, q := range drop {
			e.Exec(t, q)
		}
	}
	t.Cleanup(restore)
	return restore
}

// DeliverNow runs, through the real claim, one attempt for each of the
// given queued sends and for no other (an instance started with
// NoWorkers): the other due sends are put off while it runs, then made due
// again.
func (e *Env) DeliverNow(t testing.TB, ids ...string) {
	t.Helper()
	later := e.Clock.Now().Add(24 * time.Hour).UnixMicro()
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")
	args := []any{later}
	for _, id := range ids {
		args = append(args, id)
	}
	e.Exec(t, `UPDATE sends SET next_attempt_at = ? + next_attempt_at WHERE status = 'queued' AND id NOT IN (`+marks+`)`, args...)
	defer e.Exec(t, `UPDATE sends SET next_attempt_at = next_attempt_at - ? WHERE status = 'queued' AND next_attempt_at > ?`, later, later)
	n, err := e.Server.Deliver.RunOnce(context.Background())
	if err != nil || n != len(ids) {
		t.Fatalf("DeliverNow: %d attempts, %v; want %d", n, err, len(ids))
	}
}
