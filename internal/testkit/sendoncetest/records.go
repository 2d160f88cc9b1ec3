package sendoncetest

import (
	"context"
	"testing"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
)

// IdempotencyRecords is a subquery of every stored idempotency record,
// wherever the store keeps it — an accepted send's in its own row, any
// other in idempotency_keys (internal/sqlstore/sendrecord.go) — with the
// columns tenant, method, route, key, fingerprint, state, token and body.
const IdempotencyRecords = `(SELECT tenant, method, route, key, fingerprint, state, token, body FROM idempotency_keys
	UNION ALL SELECT tenant, idem_method, idem_route, idem_key, idem_fingerprint, 'completed', idem_token, idem_body
	FROM sends WHERE idem_key IS NOT NULL)`

// ForgetIdempotencyKey deletes every stored record of the key as stored
// (in any scope), as expiry would: the sends stay.
func (e *Env) ForgetIdempotencyKey(t testing.TB, key string) {
	t.Helper()
	e.Exec(t, `DELETE FROM idempotency_keys WHERE key = ?`, key)
	e.Exec(t, `UPDATE sends SET idem_method = NULL, idem_route = NULL, idem_key = NULL, idem_fingerprint = NULL,
		idem_token = NULL, idem_status = NULL, idem_content_type = NULL, idem_body = NULL, idem_expires_at = NULL
		WHERE idem_key = ?`, key)
}

// ForgetIdempotencyKeys deletes every stored record, as expiry would.
func (e *Env) ForgetIdempotencyKeys(t testing.TB) {
	t.Helper()
	e.Exec(t, `DELETE FROM idempotency_keys`)
	e.Exec(t, `UPDATE sends SET idem_method = NULL, idem_route = NULL, idem_key = NULL, idem_fingerprint = NULL,
		idem_token = NULL, idem_status = NULL, idem_content_type = NULL, idem_body = NULL, idem_expires_at = NULL
		WHERE idem_key IS NOT NULL`)
}

// PutIdempotencyRecord stores resp as a completed record under sc and
// fingerprint fp, expiring in a day, the way the engine stores one (a
// decision, then the answer), but in whatever form a test names: a
// record an older version left, say.
func (e *Env) PutIdempotencyRecord(t testing.TB, sc idempotency.Scope, fp string, resp idempotency.Response) {
	t.Helper()
	ctx := context.Background()
	err := e.Server.Store.InTx(ctx, func(tx core.Tx) error {
		now := e.Clock.Now()
		d, err := tx.DecideIdempotency(ctx, sc, fp, now)
		if err != nil {
			return err
		}
		return tx.PutIdempotency(ctx, sc, fp, d.Token, resp, now, now.Add(24*time.Hour))
	})
	if err != nil {
		t.Fatalf("store the plain record: %v", err)
	}
}
