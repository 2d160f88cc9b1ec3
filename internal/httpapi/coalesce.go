package httpapi

import (
	"sync"

	"github.com/sendonce/sendonce/idempotency"
)

// running coalesces concurrent requests for one scoped key within this
// process: the first runs, the others wait for it and are answered from
// the replay cache, instead of each taking a turn at the database writer
// only to find the key decided. In a retry storm (one request and its
// duplicates arriving together) that keeps seven in eight requests away
// from the writer.
//
// It decides nothing itself: a waiter that finds no stored answer once
// the first is done (a 5xx rolled back, an answer too large to cache)
// goes on as if it had come alone, and the database decides.
type running struct {
	mu sync.Mutex
	m  map[idempotency.Scope]chan struct{}
}

// enter registers a request for sc. The first gets leader true and must
// call leave; the others get the channel closed when it does.
func (r *running) enter(sc idempotency.Scope) (leader bool, done <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ch, ok := r.m[sc]; ok {
		return false, ch
	}
	if r.m == nil {
		r.m = map[idempotency.Scope]chan struct{}{}
	}
	ch := make(chan struct{})
	r.m[sc] = ch
	return true, ch
}

func (r *running) leave(sc idempotency.Scope) {
	r.mu.Lock()
	ch := r.m[sc]
	delete(r.m, sc)
	r.mu.Unlock()
	close(ch)
}
