package sqlstore

import (
	"context"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
)

// KeyStore is the store's idempotency table as a two-step
// idempotency.Store (reserve, work, complete), for work that cannot run in
// the store's own transaction. The server decides its keys inside the
// send's transaction instead (core.Tx is an idempotency.TxRecords); both
// run the package's conformance suite against this one table.
//
// Its three steps (ReserveIdempotency, CompleteIdempotency,
// ReleaseIdempotency) are methods of the concrete Store and Tx, not of
// core.Store: no consumer of the domain uses the two-step form.
func (s *Store) KeyStore() idempotency.Store { return keyStore{s} }

type keyStore struct{ s *Store }

func (k keyStore) Reserve(ctx context.Context, sc idempotency.Scope, fingerprint string, now time.Time, lease time.Duration) (idempotency.Decision, error) {
	return k.s.ReserveIdempotency(ctx, sc, fingerprint, now, lease)
}

func (k keyStore) Complete(ctx context.Context, sc idempotency.Scope, token string, resp idempotency.Response, now, expires time.Time) error {
	return k.s.InTx(ctx, func(tx core.Tx) error { return tx.(*Tx).CompleteIdempotency(ctx, sc, token, resp, now, expires) })
}

func (k keyStore) Release(ctx context.Context, sc idempotency.Scope, token string) error {
	return k.s.ReleaseIdempotency(ctx, sc, token)
}
