package sqlstore_test

import (
	"context"
	"testing"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/idempotency/idempotencytest"
	"github.com/sendonce/sendonce/internal/core"
)

// sendonce's own store runs the idempotency package's conformance suite on
// each database, as the transactional tier the server decides keys with.
func TestIdempotencyConformance_InTheSendTransaction(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		idempotencytest.RunTx(t, func(t testing.TB) idempotencytest.TxStore {
			s := b.openStore(t.(*testing.T), b.newDB(t.(*testing.T)))
			return idempotencytest.TxStore{
				InTx: func(ctx context.Context, fn func(idempotency.TxRecords) error) error {
					return s.InTx(ctx, func(tx core.Tx) error { return fn(tx) })
				},
				Lookup: s.CompletedIdempotency,
			}
		})
	})
}
