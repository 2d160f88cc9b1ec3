package app

import (
	"context"
	"sync"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
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

// OlderFormReplay is the look a door takes, before deciding a key under
// its current form (core.StoredIdempotencyKey, the SMTP "msgid " form), at
// the forms the same request was stored under by older versions (the
// plain key, core.KeyScopedIdempotencyKey): a retry of a request accepted
// before the upgrade must replay, not run again. It returns the stored
// response of the first of olds that holds a completed, unexpired record
// with the request's fingerprint; anything else — no record, the window of
// one TTL after the upgrade over — returns nil and the request is decided
// as usual. A record with another fingerprint does not refuse the request
// either: it may be another key's claim, which is what the current forms
// stop. Outside the window nothing is read, so the current forms cost no
// second lookup.
func (s *Service) OlderFormReplay(ctx context.Context, olds []idempotency.Scope, fp string, ttl time.Duration) (*idempotency.Response, error) {
	since, err := s.scopedSince.get(ctx, s)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	if !now.Before(since.Add(ttl)) {
		return nil, nil
	}
	for _, old := range olds {
		rec, err := s.store.CompletedIdempotency(ctx, old)
		if err != nil {
			return nil, err
		}
		if rec != nil && idempotency.Decide(rec, fp, now) == idempotency.Replay {
			return rec.Response, nil
		}
	}
	return nil, nil
}

// CompletedIdempotency returns the scoped key's completed, stored record,
// nil when it has none: what a door reads to answer a key that holds
// another request (to name what holds it, or to match a fingerprint an
// older version made).
func (s *Service) CompletedIdempotency(ctx context.Context, sc idempotency.Scope) (*idempotency.Record, error) {
	rec, err := s.store.CompletedIdempotency(ctx, sc)
	if err != nil {
		return nil, err
	}
	if rec == nil || !s.Now().Before(rec.ExpiresAt) {
		return nil, nil
	}
	return rec, nil
}

// IdempotencyScope is the scope every door decides a request's key under
// with idempotency.Run, and the Earlier look Run takes before it: stored
// is the key as the door names it (the caller's Idempotency-Key, or one
// derived for it in a form of its own, such as SMTP's "msgid "), idem the
// caller's key as older versions stored it. The scope's key is
// core.StoredIdempotencyKey(key, stored); when that is not idem, earlier
// replays a retry of a request an older version stored under idem or under
// the API key's own namespace (core.KeyScopedIdempotencyKey), matched by
// fp, or by legacy's (the fingerprint an older version made of the same
// request; nil when it made the same), within one ttl of the upgrade
// (OlderFormReplay). earlier is nil when there is
// nothing older to look at.
func (s *Service) IdempotencyScope(key *core.APIKey, method, route, stored, idem string, ttl time.Duration, fp string, legacy func() string) (
	sc *idempotency.Scope, earlier func(context.Context) (*idempotency.Response, error)) {
	sc = &idempotency.Scope{Tenant: key.Tenant, Method: method, Route: route, Key: core.StoredIdempotencyKey(key, stored)}
	if sc.Key == idem {
		return sc, nil // an unrestricted key's own key: stored plain, as always
	}
	plain := *sc
	plain.Key = idem
	olds := []idempotency.Scope{plain}
	if key.OwnsIdempotencyKeys() {
		perKey := *sc
		perKey.Key = core.KeyScopedIdempotencyKey(key, stored)
		olds = append(olds, perKey)
	}
	return sc, func(ctx context.Context) (*idempotency.Response, error) {
		resp, err := s.OlderFormReplay(ctx, olds, fp, ttl)
		if resp != nil || err != nil || legacy == nil {
			return resp, err
		}
		return s.OlderFormReplay(ctx, olds, legacy(), ttl)
	}
}
