package server

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sendonce/sendonce/internal/httpapi/kit"
	"github.com/sendonce/sendonce/internal/sqlstore"
)

// readyTimeout bounds the database's answer to a readiness probe: a
// database slower than that is as good as gone to a load balancer (whose
// probes time out after a second or a few).
const readyTimeout = 2 * time.Second

// The process's phases, as GET /readyz sees them.
const (
	phaseStarting int32 = iota
	phaseUp
	phaseDraining
)

// readiness is what GET /readyz answers from: the process's phase, then
// the database's state. It logs when its answer changes, not per probe:
// a load balancer asks every few seconds.
type readiness struct {
	phase  atomic.Int32
	store  *sqlstore.Store
	logger *slog.Logger
	last   atomic.Value // string: the previous answer
}

// check is kit.Config.Ready.
func (r *readiness) check(ctx context.Context) string {
	switch r.phase.Load() {
	case phaseStarting:
		return kit.NotReadyStarting
	case phaseDraining:
		return kit.NotReadyDraining
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := r.store.Ping(ctx); err != nil {
		return r.changed(ctx, kit.NotReadyDatabase, slog.Any("error", err))
	}
	pending, err := r.store.PendingMigrations(ctx)
	if err != nil {
		return r.changed(ctx, kit.NotReadyDatabase, slog.Any("error", err))
	}
	if len(pending) > 0 {
		return r.changed(ctx, kit.NotReadyMigrations, slog.Any("pending", pending))
	}
	return r.changed(ctx, "")
}

// changed returns reason, logging it first when the last probe's answer
// was another.
func (r *readiness) changed(ctx context.Context, reason string, detail ...slog.Attr) string {
	old, _ := r.last.Swap(reason).(string)
	switch {
	case old == reason:
	case reason == "":
		r.logger.InfoContext(ctx, "ready again")
	default:
		r.logger.LogAttrs(ctx, slog.LevelWarn, "not ready", append([]slog.Attr{slog.String("reason", reason)}, detail...)...)
	}
	return reason
}

// Drain makes GET /readyz answer 503 "draining" from now on, while every
// listener keeps serving: the serve command calls it on SIGTERM, before
// the drain delay lets load balancers see it.
func (s *Server) Drain() {
	s.ready.phase.Store(phaseDraining)
}
