package idempotency

import (
	"sync"
)

// running holds the scoped keys whose first request is running in this
// process, so that a concurrent duplicate is answered 409
// idempotency_key_in_use at once (docs/api.md, "Idempotency") instead of
// taking a turn at the database writer only to find the key held. In a
// retry storm that keeps the duplicates away from the writer. The database
// still decides across processes.
type running struct {
	mu sync.Mutex
	m  map[Scope]string // the running request's fingerprint
}

// enter registers a first request for sc with fingerprint fp. When one is
// running already it returns what the contract answers instead: InUse, or
// Mismatch when that one has another fingerprint. A request that entered
// must leave.
func (r *running) enter(sc Scope, fp string) (ok bool, o Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if o, busy := r.lookup(sc, fp); busy {
		return false, o
	}
	if r.m == nil {
		r.m = map[Scope]string{}
	}
	r.m[sc] = fp
	return true, Proceed
}

// busy says what a request for sc gets while a first one runs (InUse or
// Mismatch), without registering it; ok is false when none runs.
func (r *running) busy(sc Scope, fp string) (o Outcome, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookup(sc, fp)
}

// lookup is busy with r.mu held.
func (r *running) lookup(sc Scope, fp string) (Outcome, bool) {
	other, ok := r.m[sc]
	switch {
	case !ok:
		return Proceed, false
	case other != fp:
		return Mismatch, true
	}
	return InUse, true
}

func (r *running) leave(sc Scope) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, sc)
}
