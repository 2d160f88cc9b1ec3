package app

import (
	"log/slog"
	"time"

	"github.com/sendonce/sendonce/idempotency"
)

// IdempotencyConfig is what the process's idempotency engine is made of,
// beside the store it decides keys in.
type IdempotencyConfig struct {
	// Front is an optional store shared by processes (Redis), asked
	// before the database so that retry storms are answered from memory.
	// The database stays the source of truth.
	Front idempotency.Store
	// TTL is how long a completed key replays; Lease how long a running
	// first request holds its key. Default to the package's defaults.
	TTL, Lease time.Duration
	// ReplayCacheEntries bounds the in-memory cache of completed keys. 0
	// means idempotency.DefaultReplayCacheEntries; negative turns it off.
	ReplayCacheEntries int
	// Logger defaults to none.
	Logger *slog.Logger
}

// Idempotency returns the engine of this process, which every door (the
// HTTP API, SMTP submission, the dashboard) shares: one per service, built
// with it, so that a key's running request and its replay cache are one
// and no door can run a write protocol of its own. Keys are decided inside
// each write's own transaction (core.Tx is an idempotency.TxRecords); the
// read pool answers completed keys before any write.
func (s *Service) Idempotency() *idempotency.Engine { return s.idem }

func (s *Service) newIdempotencyEngine(c IdempotencyConfig) *idempotency.Engine {
	cache := c.ReplayCacheEntries
	if cache == 0 {
		cache = idempotency.DefaultReplayCacheEntries
	}
	if c.Logger == nil {
		c.Logger = s.logger
	}
	return idempotency.NewEngine(idempotency.Config{
		Lookup: s.store.CompletedIdempotency, Front: c.Front, ReplayCacheEntries: cache,
		TTL: c.TTL, Lease: c.Lease, Now: s.Now, Logger: c.Logger,
	})
}
