package idempotency

import (
	"context"
	"sync"
	"time"
)

// MemoryStore keeps records in a map inside the process: for a service that
// runs as a single process, and for unit tests of your own handlers. Records
// are lost on restart. The zero value is not usable; call NewMemoryStore.
type MemoryStore struct {
	mu      sync.Mutex
	recs    map[Scope]*Record
	reserve int // Reserve calls since the last sweep
}

// memorySweepEvery is how many Reserve calls pass between two sweeps of
// expired records; a sweep visits each record once.
const memorySweepEvery = 1024

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{recs: make(map[Scope]*Record)}
}

// Reserve implements Store.
func (m *MemoryStore) Reserve(_ context.Context, sc Scope, fingerprint string, now time.Time, lease time.Duration) (Decision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reserve++
	if m.reserve >= memorySweepEvery {
		m.reserve = 0
		m.purgeLocked(now)
	}
	rec := m.recs[sc]
	switch o := Decide(rec, fingerprint, now); o {
	case Proceed:
		token := NewToken()
		m.recs[sc] = &Record{Fingerprint: fingerprint, State: StateInFlight, Token: token, LockedUntil: now.Add(lease)}
		return Decision{Outcome: Proceed, Token: token}, nil
	case Replay:
		return Decision{Outcome: Replay, Response: copyResponse(rec.Response)}, nil
	default:
		return Decision{Outcome: o}, nil
	}
}

// Complete implements Store.
func (m *MemoryStore) Complete(_ context.Context, sc Scope, token string, resp Response, _, expires time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.recs[sc]
	if rec == nil || rec.State != StateInFlight || rec.Token != token {
		return ErrReservationLost
	}
	rec.State = StateCompleted
	rec.ExpiresAt = expires
	rec.Response = copyResponse(&resp)
	return nil
}

// Release implements Store.
func (m *MemoryStore) Release(_ context.Context, sc Scope, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec := m.recs[sc]; rec != nil && rec.State == StateInFlight && rec.Token == token {
		delete(m.recs, sc)
	}
	return nil
}

// Purge drops the records that are expired at now (Record.Expired) and
// returns how many it dropped. Reserve also does this now and then.
func (m *MemoryStore) Purge(now time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.purgeLocked(now)
}

func (m *MemoryStore) purgeLocked(now time.Time) int {
	n := 0
	for sc, rec := range m.recs {
		if rec.Expired(now) {
			delete(m.recs, sc)
			n++
		}
	}
	return n
}

// Len returns the number of records held, expired ones included until the
// next sweep. Useful in tests.
func (m *MemoryStore) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.recs)
}

func copyResponse(r *Response) *Response {
	if r == nil {
		return nil
	}
	c := *r
	c.Body = append([]byte(nil), r.Body...)
	return &c
}
