package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
)

// ReserveIdempotency implements core.Store: a lookup without the write
// lock, then Tx.ReserveIdempotency in a transaction of its own.
func (s *Store) ReserveIdempotency(ctx context.Context, sc idempotency.Scope, fingerprint string, now time.Time, lease time.Duration) (idempotency.Decision, error) {
	rec, err := s.CompletedIdempotency(ctx, sc)
	if err != nil {
		return idempotency.Decision{}, err
	}
	if rec != nil {
		switch o := idempotency.Decide(rec, fingerprint, now); o {
		case idempotency.Replay:
			return idempotency.Decision{Outcome: o, Response: rec.Response}, nil
		case idempotency.Mismatch:
			return idempotency.Decision{Outcome: o}, nil
		}
	}
	var d idempotency.Decision
	err = s.InTx(ctx, func(tx core.Tx) error {
		var err error
		d, err = tx.ReserveIdempotency(ctx, sc, fingerprint, now, lease)
		return err
	})
	return d, err
}

// CompletedIdempotency implements core.Store. It needs no write lock: a
// completed key's record does not change until it expires, so a replay (or
// a mismatch) decided on it is final. A retry storm is then served by the
// read pool.
func (s *Store) CompletedIdempotency(ctx context.Context, sc idempotency.Scope) (*idempotency.Record, error) {
	rec, err := readIdempotency(ctx, s.r, sc, "")
	if err != nil || rec == nil || rec.State != idempotency.StateCompleted {
		return nil, err
	}
	return rec, nil
}

// ReserveIdempotency implements core.Tx: it decides the key inside the
// transaction and, on Proceed, holds it until the transaction ends (and
// for lease after, should it commit without completing it).
func (t *Tx) ReserveIdempotency(ctx context.Context, sc idempotency.Scope, fingerprint string, now time.Time, lease time.Duration) (idempotency.Decision, error) {
	token := idempotency.NewToken()
	if t.s.PG != nil {
		// A first request still running in another transaction (another
		// process) holds the key's lock until it ends. Without this the
		// insert below would wait for it; the contract wants 409 at once.
		// Every reservation takes the lock, so one taken here means no
		// uncommitted insert of this key can make the insert wait. Two keys
		// sharing a 64-bit hash can meet a spurious 409, which a retry
		// clears.
		var got bool
		if err := t.q.queryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0))`,
			sc.Tenant+"\n"+sc.Method+"\n"+sc.Route+"\n"+sc.Key).Scan(&got); err != nil {
			return idempotency.Decision{}, fmt.Errorf("lock idempotency key: %w", err)
		}
		if !got {
			return idempotency.Decision{Outcome: idempotency.InUse}, nil
		}
	}
	// Insert first: the primary key decides between concurrent first
	// requests.
	n, err := t.q.exec(ctx, `INSERT INTO idempotency_keys
		(tenant, method, route, key, fingerprint, state, token, locked_until, created_at)
		VALUES (?, ?, ?, ?, ?, 'in_flight', ?, ?, ?)
		ON CONFLICT (tenant, method, route, key) DO NOTHING`,
		sc.Tenant, sc.Method, sc.Route, sc.Key, fingerprint, token, micros(now.Add(lease)), micros(now))
	if err != nil {
		return idempotency.Decision{}, fmt.Errorf("reserve idempotency key: %w", err)
	}
	if n == 1 {
		return idempotency.Decision{Outcome: idempotency.Proceed, Token: token}, nil
	}
	rec, err := readIdempotency(ctx, t.q, sc, t.s.forUpdate)
	if err != nil {
		return idempotency.Decision{}, err
	}
	d := idempotency.Decision{Outcome: idempotency.Decide(rec, fingerprint, now)}
	switch d.Outcome {
	case idempotency.Replay:
		d.Response = rec.Response
	case idempotency.Proceed:
		// Expired, or its holder's lease ran out: take it over.
		d.Token = token
		_, err := t.q.exec(ctx, `UPDATE idempotency_keys SET fingerprint = ?, state = 'in_flight', token = ?,
			locked_until = ?, status = NULL, content_type = NULL, body = NULL, created_at = ?,
			completed_at = NULL, expires_at = NULL
			WHERE tenant = ? AND method = ? AND route = ? AND key = ?`,
			fingerprint, token, micros(now.Add(lease)), micros(now), sc.Tenant, sc.Method, sc.Route, sc.Key)
		if err != nil {
			return idempotency.Decision{}, fmt.Errorf("take over idempotency key: %w", err)
		}
	}
	return d, nil
}

func readIdempotency(ctx context.Context, q querier, sc idempotency.Scope, suffix string) (*idempotency.Record, error) {
	var (
		rec         idempotency.Record
		lockedUntil int64
		expiresAt   sql.NullInt64
		status      sql.NullInt64
		contentType sql.NullString
		body        []byte
	)
	err := q.queryRow(ctx, `SELECT fingerprint, state, token, locked_until, expires_at, status, content_type, body
		FROM idempotency_keys WHERE tenant = ? AND method = ? AND route = ? AND key = ?`+suffix,
		sc.Tenant, sc.Method, sc.Route, sc.Key).
		Scan(&rec.Fingerprint, &rec.State, &rec.Token, &lockedUntil, &expiresAt, &status, &contentType, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read idempotency key: %w", err)
	}
	rec.LockedUntil = fromMicros(lockedUntil)
	if expiresAt.Valid {
		rec.ExpiresAt = fromMicros(expiresAt.Int64)
	}
	if rec.State == idempotency.StateCompleted {
		rec.Response = &idempotency.Response{Status: int(status.Int64), ContentType: contentType.String, Body: body}
	}
	return &rec, nil
}

// CompleteIdempotency implements core.Tx.
func (t *Tx) CompleteIdempotency(ctx context.Context, sc idempotency.Scope, token string, resp idempotency.Response, now, expires time.Time) error {
	n, err := t.q.exec(ctx, `UPDATE idempotency_keys SET state = 'completed', status = ?, content_type = ?, body = ?,
		completed_at = ?, expires_at = ?
		WHERE tenant = ? AND method = ? AND route = ? AND key = ? AND token = ? AND state = 'in_flight'`,
		resp.Status, resp.ContentType, resp.Body, micros(now), micros(expires),
		sc.Tenant, sc.Method, sc.Route, sc.Key, token)
	if err != nil {
		return fmt.Errorf("complete idempotency key: %w", err)
	}
	if n != 1 {
		return idempotency.ErrReservationLost
	}
	return nil
}

// ReleaseIdempotency implements core.Store.
func (s *Store) ReleaseIdempotency(ctx context.Context, sc idempotency.Scope, token string) error {
	_, err := s.w.exec(ctx, `DELETE FROM idempotency_keys
		WHERE tenant = ? AND method = ? AND route = ? AND key = ? AND token = ? AND state = 'in_flight'`,
		sc.Tenant, sc.Method, sc.Route, sc.Key, token)
	if err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// abandonedAfter is how long past its lease an unfinished reservation is
// kept before the purge drops it; any retry after the lease already takes
// it over, so this only bounds table growth.
const abandonedAfter = time.Hour

// PurgeIdempotency implements core.Store.
func (s *Store) PurgeIdempotency(ctx context.Context, now time.Time) (int, error) {
	n, err := s.w.exec(ctx, `DELETE FROM idempotency_keys
		WHERE (state = 'completed' AND expires_at <= ?) OR (state = 'in_flight' AND locked_until <= ?)`,
		micros(now), micros(now.Add(-abandonedAfter)))
	if err != nil {
		return 0, fmt.Errorf("purge idempotency keys: %w", err)
	}
	return int(n), nil
}
