package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"sort"

	"github.com/sendonce/sendonce/idempotency"
)

// lockResult is what locking a key found: whether this transaction got
// the key's advisory lock and, if so, the key's record (nil: none).
type lockResult struct {
	got bool
	rec *idempotency.Record
}

// batchLocks holds the keys a PostgreSQL batch locked and read before it
// ran its transactions; each is taken once, by the transaction that
// decides it (Tx.DecideIdempotency).
type batchLocks map[idempotency.Scope]lockResult

func (b batchLocks) take(sc idempotency.Scope) (lockResult, bool) {
	res, ok := b[sc]
	if ok {
		delete(b, sc)
	}
	return res, ok
}

// prelock locks and reads, in one statement, the keys the batch's
// transactions will decide first (idempotency.DecisionHint): on
// PostgreSQL each decision was a round trip and a statement of its own
// before the batch's multi-row inserts. The keys are locked in a fixed
// order; a key that two transactions of the batch name is left to them.
// What each finds is what it would have found at its turn: the lock is
// the batch transaction's until it ends, and a transaction of the batch
// that writes a key before another decides it is seen through the
// deferred rows (DecideIdempotency asks the database again then).
func prelock(ctx context.Context, q querier, batch []*txReq) (batchLocks, error) {
	seen := make(map[idempotency.Scope]int, len(batch))
	for _, r := range batch {
		if r.err != nil || r.panicked != nil || r.ctx.Err() != nil {
			continue
		}
		if sc, ok := idempotency.DecisionHint(r.ctx); ok {
			seen[sc]++
		}
	}
	scopes := make([]idempotency.Scope, 0, len(seen))
	for sc, n := range seen {
		if n == 1 {
			scopes = append(scopes, sc)
		}
	}
	if len(scopes) < 2 {
		return nil, nil // one key: its own call, as it always was
	}
	texts := make([]string, len(scopes))
	for i, sc := range scopes {
		texts[i] = lockText(sc)
	}
	sort.Sort(byLockText{texts, scopes})
	tenants, methods, routes, keys := make([]string, len(scopes)), make([]string, len(scopes)), make([]string, len(scopes)), make([]string, len(scopes))
	for i, sc := range scopes {
		tenants[i], methods[i], routes[i], keys[i] = sc.Tenant, sc.Method, sc.Route, sc.Key
	}
	rows, err := q.query(ctx, `SELECT n, got, `+idempotencyColumns+` FROM sendonce_lock_idempotency_keys(?, ?, ?, ?, ?)`,
		texts, tenants, methods, routes, keys)
	if err != nil {
		return nil, fmt.Errorf("lock the batch's idempotency keys: %w", err)
	}
	defer rows.Close()
	locks := make(batchLocks, len(scopes))
	for rows.Next() {
		var (
			n                         int
			got                       bool
			fingerprint, state, token sql.NullString
			f                         recordFields
		)
		if err := rows.Scan(&n, &got, &fingerprint, &state, &token, &f.lockedUntil, &f.expiresAt, &f.status, &f.contentType, &f.body); err != nil {
			return nil, fmt.Errorf("lock the batch's idempotency keys: %w", err)
		}
		if n < 1 || n > len(scopes) {
			return nil, fmt.Errorf("lock the batch's idempotency keys: row %d of %d", n, len(scopes))
		}
		res := lockResult{got: got}
		if got && state.Valid {
			res.rec = &idempotency.Record{Fingerprint: fingerprint.String, State: idempotency.State(state.String), Token: token.String}
			f.fill(res.rec)
		}
		locks[scopes[n-1]] = res
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock the batch's idempotency keys: %w", err)
	}
	return locks, nil
}

// lockText is the text whose hash names a key's advisory lock (as
// sendonce has always hashed it: every process must name a key's lock
// the same way).
func lockText(sc idempotency.Scope) string {
	return sc.Tenant + "\n" + sc.Method + "\n" + sc.Route + "\n" + sc.Key
}

type byLockText struct {
	texts  []string
	scopes []idempotency.Scope
}

func (b byLockText) Len() int           { return len(b.texts) }
func (b byLockText) Less(i, j int) bool { return b.texts[i] < b.texts[j] }
func (b byLockText) Swap(i, j int) {
	b.texts[i], b.texts[j] = b.texts[j], b.texts[i]
	b.scopes[i], b.scopes[j] = b.scopes[j], b.scopes[i]
}
