package app

import (
	"context"
	"sync"
	"time"

	"github.com/sendonce/sendonce/idempotency"
)

// scopedSince caches Store.ScopedKeysSince, which never changes once read.
type scopedSince struct {
	mu sync.Mutex
	at time.Time // zero until read
}

func (c *scopedSince) get(ctx context.Context, s *Service) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() {
		at, err := s.store.ScopedKeysSince(ctx)
		if err != nil {
			return time.Time{}, err
		}
		c.at = at
	}
	return c.at, nil
}

// UnscopedReplay is the look a door takes, before deciding a key under its
// scoped form (core.StoredIdempotencyKey, the SMTP "msgid " form), at the
// plain form the same key was stored under before the database stored
// scoped forms: a retry of a request accepted before the upgrade must
// replay, not run again. It returns the stored response only when that
// plain record is completed, unexpired and has the request's fingerprint;
// anything else — no record, the window of one TTL after the upgrade
// over — returns nil and the request is decided as usual. A plain record
// with another fingerprint does not refuse the request either: it may be
// another key's claim, which is what the scoped forms stop. Outside the
// window nothing is read, so the scoped form costs no second lookup.
func (s *Service) UnscopedReplay(ctx context.Context, plain idempotency.Scope, fp string, ttl time.Duration) (*idempotency.Response, error) {
	since, err := s.scopedSince.get(ctx, s)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	if !now.Before(since.Add(ttl)) {
		return nil, nil
	}
	rec, err := s.store.CompletedIdempotency(ctx, plain)
	if err != nil || rec == nil {
		return nil, err
	}
	if idempotency.Decide(rec, fp, now) != idempotency.Replay {
		return nil, nil
	}
	return rec.Response, nil
}
