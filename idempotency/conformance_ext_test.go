package idempotency_test

import (
	"testing"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/idempotency/idempotencytest"
)

// TestStoreConformance runs the exported specification against every
// store of the package: memory, SQLite, PostgreSQL and Redis.
func TestStoreConformance(t *testing.T) {
	for _, o := range idempotency.StoreOpeners() {
		t.Run(o.Name, func(t *testing.T) {
			idempotencytest.RunStore(t, o.Open)
		})
	}
}
