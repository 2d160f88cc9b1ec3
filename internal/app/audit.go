package app

import (
	"context"

	"github.com/sendonce/sendonce/internal/core"
)

// RecordAudit writes an audit entry in a transaction of its own, with a
// new id and the service clock's time: it runs after the request's answer
// is decided, so a refused send's rolled-back transaction does not take
// its entry with it. The doors fill in what was asked and answered.
func (s *Service) RecordAudit(ctx context.Context, e *core.AuditEntry) error {
	e.ID, e.At = NewID("aud_"), s.Now()
	return s.store.InTx(ctx, func(tx core.Tx) error { return tx.InsertAudit(ctx, e) })
}
