package sqlstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/sendonce/sendonce/idempotency"
)

// One row per accepted send (migration 0040): the completed idempotency
// record of the request that made a send lives in the send's own row,
// under the one unique index sends_idem, so that an accept writes one row
// and one random key index entry instead of two of each. What made no
// send — a stored refusal, another route's answer, a reservation, and
// every record written before the migration — stays in idempotency_keys;
// the decide step reads the send's row first, then that table.

// sendRecordColumns are the record's columns in sends, in the order of
// the values sendRecordArgs gives.
const sendRecordColumns = `idem_method, idem_route, idem_key, idem_fingerprint, idem_token, idem_status,
	idem_content_type, idem_body, idem_expires_at`

// noSendRecord is a send row's record columns when it holds none.
var noSendRecord [9]any

// madeSend is a send the transaction inserted; holds says it took a
// record already (a row holds one).
type madeSend struct {
	id, tenant string
	holds      bool
}

// recordHolder is the first send the transaction made for tenant that
// holds no record yet: the send the request being completed accepted
// (a batch request's first send holds the batch's answer). nil when the
// request made none.
func (t *Tx) recordHolder(tenant string) *madeSend {
	for i := range t.made {
		if m := &t.made[i]; m.tenant == tenant && !m.holds {
			return m
		}
	}
	return nil
}

// putSendRecord writes sc's completed record into the send's row: into
// the batch's waiting row when it still waits (no statement at all), by
// an update when it was written already.
func (t *Tx) putSendRecord(ctx context.Context, sendID string, sc idempotency.Scope, args []any) error {
	if t.deferred.fillSend(sendID, scopeKey(sc), args) {
		return nil
	}
	_, err := t.q.exec(ctx, `UPDATE sends SET idem_method = ?, idem_route = ?, idem_key = ?, idem_fingerprint = ?,
		idem_token = ?, idem_status = ?, idem_content_type = ?, idem_body = ?, idem_expires_at = ? WHERE id = ?`,
		append(slices.Clip(args), sendID)...)
	if err != nil {
		return fmt.Errorf("store idempotent response in its send: %w", err)
	}
	return nil
}

// clearPrior removes the record DecideIdempotency found for sc (expired,
// or a reservation abandoned) before the request's own is written:
// from a send's row (the send stays, its key no longer replays) and from
// idempotency_keys. Nothing to do, and no statement, for a new key.
func (t *Tx) clearPrior(ctx context.Context, sc idempotency.Scope) error {
	if !t.prior[sc] {
		return nil
	}
	delete(t.prior, sc)
	if _, err := t.q.exec(ctx, `UPDATE sends SET `+clearSendRecord+`
		WHERE tenant = ? AND idem_key = ? AND idem_method = ? AND idem_route = ?`,
		sc.Tenant, sc.Key, sc.Method, sc.Route); err != nil {
		return fmt.Errorf("clear the key's earlier record: %w", err)
	}
	if _, err := t.q.exec(ctx, `DELETE FROM idempotency_keys WHERE tenant = ? AND method = ? AND route = ? AND key = ?`,
		sc.Tenant, sc.Method, sc.Route, sc.Key); err != nil {
		return fmt.Errorf("clear the key's earlier record: %w", err)
	}
	return nil
}

// notePrior remembers that sc had a record when it was decided.
func (t *Tx) notePrior(sc idempotency.Scope) {
	if t.prior == nil {
		t.prior = make(map[idempotency.Scope]bool, 1)
	}
	t.prior[sc] = true
}

// clearSendRecord is the assignment that forgets a send's record.
const clearSendRecord = `idem_method = NULL, idem_route = NULL, idem_key = NULL, idem_fingerprint = NULL,
	idem_token = NULL, idem_status = NULL, idem_content_type = NULL, idem_body = NULL, idem_expires_at = NULL`

// fillSend puts a record into the batch's waiting row of send id; false
// when the row is not waiting (written already, or no batch).
func (d *deferredRows) fillSend(id, scope string, record []any) bool {
	if d == nil {
		return false
	}
	for i := len(d.sends) - 1; i >= 0; i-- {
		r := &d.sends[i]
		if r.key != id {
			continue
		}
		copy(r.args[len(r.args)-len(noSendRecord):], record)
		d.wide = append(d.wide, scope)
		return true
	}
	return false
}
