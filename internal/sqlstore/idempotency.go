package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/idempotency"
)

// CompletedIdempotency implements core.Store. It needs no write lock: a
// completed key's record does not change until it expires, so a replay (or
// a mismatch) decided on it is final. A retry storm is then served by the
// read pool.
func (s *Store) CompletedIdempotency(ctx context.Context, sc idempotency.Scope) (*idempotency.Record, error) {
	rec, err := readIdempotency(ctx, s.r, sc)
	if err != nil || rec == nil || rec.State != idempotency.StateCompleted {
		return nil, err
	}
	return rec, nil
}

// DecideIdempotency implements core.Tx: it reads the scoped key inside the
// transaction and decides the request. On Proceed the key is the
// transaction's until it ends — SQLite's writer excludes every other one;
// on PostgreSQL a transaction-scoped advisory lock does — so nothing is
// written for it until PutIdempotency stores the answer: one row write per
// accepted request.
func (t *Tx) DecideIdempotency(ctx context.Context, sc idempotency.Scope, fingerprint string, now time.Time) (idempotency.Decision, error) {
	// The batch's deferred rows matter only when this key is among them
	// (another transaction of the batch completed it).
	q := t.direct
	if t.deferred.hasKey(sc) {
		q = t.q
	}
	var (
		rec *idempotency.Record
		err error
	)
	if t.s.PG != nil {
		var got bool
		if res, ok := t.locks.take(sc); ok && q == t.direct {
			got, rec = res.got, res.rec // locked and read for the batch (prelock.go)
		} else if got, rec, err = lockIdempotency(ctx, q, sc); err != nil {
			return idempotency.Decision{}, err
		}
		if !got {
			return idempotency.Decision{Outcome: idempotency.InUse}, nil
		}
	} else if rec, err = readIdempotency(ctx, q, sc); err != nil {
		return idempotency.Decision{}, err
	}
	if rec != nil {
		t.notePrior(sc)
	}
	d := idempotency.Decision{Outcome: idempotency.Decide(rec, fingerprint, now)}
	switch d.Outcome {
	case idempotency.Replay:
		d.Response = rec.Response
	case idempotency.Proceed:
		// Also for a record past its expiry or an abandoned reservation:
		// PutIdempotency clears it (clearPrior), and a late completion of the old
		// reservation fails on its token.
		d.Token = idempotency.NewToken()
	}
	return d, nil
}

// lockIdempotency takes the scoped key's transaction-scoped advisory lock
// and, when it got it, reads (and row-locks) the key's record: one round
// trip, through the function of migration 0006 (a plain statement would
// read as of its start, before the lock). A first request still running in
// another transaction (another process) holds the lock until it ends; the
// contract wants 409 at once rather than a wait. Two keys sharing a 64-bit
// hash can meet a spurious 409, which a retry clears.
func lockIdempotency(ctx context.Context, q querier, sc idempotency.Scope) (got bool, rec *idempotency.Record, err error) {
	var (
		fingerprint, state, token sql.NullString
		f                         recordFields
	)
	err = q.queryRow(ctx, `SELECT got, `+idempotencyColumns+` FROM sendonce_lock_idempotency_key(?, ?, ?, ?, ?)`,
		lockText(sc), sc.Tenant, sc.Method, sc.Route, sc.Key).
		Scan(&got, &fingerprint, &state, &token, &f.lockedUntil, &f.expiresAt, &f.status, &f.contentType, &f.body)
	if err != nil {
		return false, nil, fmt.Errorf("lock idempotency key: %w", err)
	}
	if !got || !state.Valid {
		return got, nil, nil
	}
	rec = &idempotency.Record{Fingerprint: fingerprint.String, State: idempotency.State(state.String), Token: token.String}
	f.fill(rec)
	return true, rec, nil
}

const (
	putKeyHead = `INSERT INTO idempotency_keys
		(tenant, method, route, key, fingerprint, state, token, locked_until, status, content_type, body,
		 created_at, completed_at, expires_at) VALUES `
	putKeyTail = `
		ON CONFLICT (tenant, method, route, key) DO UPDATE SET fingerprint = excluded.fingerprint,
		 state = 'completed', token = excluded.token, locked_until = excluded.locked_until,
		 status = excluded.status, content_type = excluded.content_type, body = excluded.body,
		 created_at = excluded.created_at, completed_at = excluded.completed_at, expires_at = excluded.expires_at`
)

// PutIdempotency implements core.Tx: the decided key's completed record,
// written once, in the transaction that did the request's work — into the
// row of the send the request made (sendrecord.go), or, when it made
// none, into idempotency_keys. In a batch it waits for the batch's
// multi-row insert (deferredRows).
func (t *Tx) PutIdempotency(ctx context.Context, sc idempotency.Scope, fingerprint, token string, resp idempotency.Response, now, expires time.Time) error {
	if err := t.clearPrior(ctx, sc); err != nil {
		return err
	}
	if m := t.recordHolder(sc.Tenant); m != nil {
		m.holds = true
		return t.putSendRecord(ctx, m.id, sc, []any{sc.Method, sc.Route, sc.Key, fingerprint, token,
			resp.Status, resp.ContentType, resp.Body, micros(expires)})
	}
	args := []any{sc.Tenant, sc.Method, sc.Route, sc.Key, fingerprint, "completed", token, micros(now),
		resp.Status, resp.ContentType, resp.Body, micros(now), micros(now), micros(expires)}
	if t.deferred != nil {
		if t.deferred.hasKey(sc) {
			// One statement must not write a row twice (PostgreSQL refuses).
			if err := t.deferred.flush(ctx, t.direct); err != nil {
				return err
			}
		}
		t.deferred.addKey(sc, args)
		return nil
	}
	st := insertStatement(putKeyHead, putKeyTail, []deferredRow{{args: args}})
	if _, err := t.q.exec(ctx, st.sql, st.args...); err != nil {
		return fmt.Errorf("store idempotent response: %w", err)
	}
	return nil
}

const idempotencyColumns = `fingerprint, state, token, locked_until, expires_at, status, content_type, body`

// recordFields are the columns of a record that need converting.
type recordFields struct {
	lockedUntil sql.NullInt64
	expiresAt   sql.NullInt64
	status      sql.NullInt64
	contentType sql.NullString
	body        []byte
}

func (f *recordFields) fill(rec *idempotency.Record) {
	rec.LockedUntil = fromMicros(f.lockedUntil.Int64)
	if f.expiresAt.Valid {
		rec.ExpiresAt = fromMicros(f.expiresAt.Int64)
	}
	if rec.State == idempotency.StateCompleted {
		rec.Response = &idempotency.Response{Status: int(f.status.Int64), ContentType: f.contentType.String, Body: f.body}
	}
}

// readRecordSQL reads a scoped key's record: from the row of the send it
// made when there is one, else from idempotency_keys (sendrecord.go).
// Both are lookups on a unique index, and a scope has a record in at most
// one of them (a key that proceeds over an older record clears it wherever
// it is), so the union needs no ORDER BY: without one, SQLite runs the two
// searches in turn and stops at the first row instead of merging two
// sorted coroutines for every decide.
const readRecordSQL = `SELECT 0 AS src, idem_fingerprint, 'completed', idem_token, 0, idem_expires_at, idem_status, idem_content_type, idem_body
		FROM sends WHERE tenant = ? AND idem_key = ? AND idem_method = ? AND idem_route = ?
	UNION ALL
	SELECT 1, ` + idempotencyColumns + `
		FROM idempotency_keys WHERE tenant = ? AND method = ? AND route = ? AND key = ?
	LIMIT 1`

func readIdempotency(ctx context.Context, q querier, sc idempotency.Scope) (*idempotency.Record, error) {
	var (
		src int
		rec idempotency.Record
		f   recordFields
	)
	err := q.queryRow(ctx, readRecordSQL, sc.Tenant, sc.Key, sc.Method, sc.Route, sc.Tenant, sc.Method, sc.Route, sc.Key).
		Scan(&src, &rec.Fingerprint, &rec.State, &rec.Token, &f.lockedUntil, &f.expiresAt, &f.status, &f.contentType, &f.body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read idempotency key: %w", err)
	}
	f.fill(&rec)
	return &rec, nil
}

// PurgeIdempotency implements core.Store. It deletes the records that are
// expired at now, by the rule every idempotency store drops them by
// (idemtype.Record.Expired; idempotency.SQLStore.Purge is the same SQL):
// a completed key from its expiry on, a reservation (which only older
// releases wrote) from the end of its lease.
func (s *Store) PurgeIdempotency(ctx context.Context, now time.Time) (int, error) {
	n, err := s.w.exec(ctx, `DELETE FROM idempotency_keys
		WHERE (state = 'completed' AND expires_at <= ?) OR (state <> 'completed' AND locked_until <= ?)`,
		micros(now), micros(now))
	if err != nil {
		return 0, fmt.Errorf("purge idempotency keys: %w", err)
	}
	// A send's record: its columns go, the send stays for its retention.
	m, err := s.w.exec(ctx, `UPDATE sends SET `+clearSendRecord+` WHERE idem_expires_at <= ?`, micros(now))
	if err != nil {
		return int(n), fmt.Errorf("purge the sends' idempotency records: %w", err)
	}
	return int(n + m), nil
}
