package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of docs/api.md, "Idempotency": how long a completed key
// replays, and how long a reservation holds a key before another request
// may take it over.
const (
	DefaultTTL   = 24 * time.Hour
	DefaultLease = 30 * time.Second
)

// Config configures an Engine. Exactly one durable tier is used: Store,
// decided before the handler runs, or — with Store nil — a TxRecords in
// the caller's transaction (Ticket.Decide and Ticket.Put).
type Config struct {
	// Store is the durable tier of a two-step engine: Reserve before the
	// work, Complete or Release after it. Nil for a transactional engine.
	Store Store
	// Lookup reads a key's completed record without taking a lock (a read
	// pool or a replica), so that a replay or a reused key is answered
	// before any write. Optional. It must only return records a committed
	// transaction wrote.
	Lookup func(ctx context.Context, sc Scope) (*Record, error)
	// Front is an optional store shared by processes and asked before the
	// durable tier (redisstore.Store), so that a retry storm is answered without
	// touching the database. It is never the truth: an error falls through
	// to the durable tier, and an InUse from it is checked there.
	Front Store
	// ReplayCacheEntries bounds the in-process cache of completed records:
	// 0 or less keeps none. DefaultReplayCacheEntries is what sendonce
	// uses.
	ReplayCacheEntries int
	// TTL is how long a completed key replays. Defaults to DefaultTTL.
	TTL time.Duration
	// Lease is how long a reservation holds a key. Defaults to
	// DefaultLease.
	Lease time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Logger receives the failures of tiers that do not decide (Front, a
	// release). Defaults to slog.Default().
	Logger *slog.Logger
}

// Engine answers the one question of idempotency — what does a request
// with this scoped key and fingerprint get — by asking its tiers in order,
// cheapest first:
//
//  1. the replay cache: completed records this process saw (memory);
//  2. the first requests running in this process (memory): a duplicate of
//     one gets InUse or Mismatch without a store call;
//  3. the front store (Redis), when configured;
//  4. Lookup, a lock-free read of the durable record, when configured;
//  5. the durable tier: Store.Reserve, or TxRecords in the caller's
//     transaction.
//
// A completed record never changes before it expires (only reservations
// are taken over or released), so a tier that holds one answers for all.
// An Engine is safe for concurrent use; one per process and store.
type Engine struct {
	store   Store
	lookup  func(ctx context.Context, sc Scope) (*Record, error)
	front   Store
	cache   *replayCache
	running running
	ttl     time.Duration
	lease   time.Duration
	now     func() time.Time
	logger  *slog.Logger
}

// NewEngine returns an engine with c's tiers.
func NewEngine(c Config) *Engine {
	e := &Engine{store: c.Store, lookup: c.Lookup, front: c.Front, ttl: c.TTL, lease: c.Lease, now: c.Now, logger: c.Logger}
	if c.ReplayCacheEntries > 0 {
		e.cache = newReplayCache(c.ReplayCacheEntries)
	}
	e.ttl = positiveOr(e.ttl, DefaultTTL)
	e.lease = positiveOr(e.lease, DefaultLease)
	if e.now == nil {
		e.now = time.Now
	}
	if e.logger == nil {
		e.logger = slog.Default()
	}
	return e
}

// TTL is how long a completed key replays.
func (e *Engine) TTL() time.Duration { return e.ttl }

// Ticket is one request's passage through an Engine. Begin decides what
// it can; on Proceed the caller does the work and ends the ticket with
// exactly one of Complete (two-step engine), Committed (after Put, or
// after storing the answer itself) or Release. Ending it twice does
// nothing; a ticket that is not Proceed is already ended.
type Ticket struct {
	// Decision is what the request gets. When Outcome is Proceed the
	// request runs; anything else is answered as it is.
	Decision Decision

	e           *Engine
	scope       Scope
	fingerprint string
	token       string // the durable tier's: from Reserve, or from Decide in the transaction
	frontToken  string
	entered     bool // holds the running slot
	put         *Response
	putAt       time.Time
	ended       bool
}

// Scope is the ticket's scoped key.
func (t *Ticket) Scope() Scope { return t.scope }

// Token is the durable reservation's token (two-step engines), needed by a
// caller that completes the reservation itself (TxStore.CompleteTx).
func (t *Ticket) Token() string { return t.token }

// Begin asks the tiers that need no transaction of the caller's. On a
// two-step engine a Proceed holds the durable reservation; on a
// transactional one it is provisional until Decide confirms it inside the
// caller's transaction.
func (e *Engine) Begin(ctx context.Context, sc Scope, fingerprint string) (*Ticket, error) {
	t := &Ticket{e: e, scope: sc, fingerprint: fingerprint}
	if d, ok := e.Cached(sc, fingerprint); ok {
		return t.final(d), nil
	}
	now := e.now()
	if o, busy := e.running.busy(sc, fingerprint); busy {
		return t.final(Decision{Outcome: o}), nil
	}
	if t.askFront(ctx, now) || t.askLookup(ctx, now) {
		return t, nil
	}
	// Registered atomically: of two first requests that both got this
	// far, one runs and the other gets InUse (or Mismatch).
	ok, o := e.running.enter(sc, fingerprint)
	if !ok {
		t.releaseFront(ctx)
		return t.final(Decision{Outcome: o}), nil
	}
	t.entered = true
	if e.store != nil {
		d, err := e.store.Reserve(ctx, sc, fingerprint, now, e.lease)
		if err != nil {
			t.Release(ctx)
			return nil, fmt.Errorf("idempotency: reserve: %w", err)
		}
		if d.Outcome != Proceed {
			t.fillFront(ctx, d)
			t.end(ctx)
			t.Decision = d
			return t, nil
		}
		t.token = d.Token
	}
	t.Decision = Decision{Outcome: Proceed, Token: t.token}
	return t, nil
}

// Cached decides the request from this process's replay cache alone,
// taking nothing: a Replay or a Mismatch of a completed record (ok), or
// nothing (ok false: Begin and the store decide). Begin asks it first;
// a caller may ask it before building what Run needs, the path of a busy
// server's replays.
func (e *Engine) Cached(sc Scope, fingerprint string) (d Decision, ok bool) {
	now := e.now()
	rec := e.cache.get(sc, now)
	if rec == nil {
		return Decision{}, false
	}
	return decidedBy(rec, fingerprint, now)
}

// final ends a ticket that Begin answered before it took anything.
func (t *Ticket) final(d Decision) *Ticket {
	t.Decision, t.ended = d, true
	return t
}

// decideOn answers from a completed record when it decides the request (a
// replay or a reused key) and reports whether it did.
func (t *Ticket) decideOn(rec *Record, now time.Time) bool {
	d, ok := decidedBy(rec, t.fingerprint, now)
	if ok {
		t.final(d)
	}
	return ok
}

// decidedBy is the decision a completed record makes of a request with
// fingerprint: a Replay or a Mismatch (ok), or none.
func decidedBy(rec *Record, fingerprint string, now time.Time) (Decision, bool) {
	switch o := Decide(rec, fingerprint, now); o {
	case Replay:
		return Decision{Outcome: o, Response: rec.Response}, true
	case Mismatch:
		return Decision{Outcome: o}, true
	}
	return Decision{}, false
}

// askFront reserves in the front store and reports whether its answer
// ended the request.
func (t *Ticket) askFront(ctx context.Context, now time.Time) bool {
	e := t.e
	if e.front == nil {
		return false
	}
	d, err := e.front.Reserve(ctx, t.scope, t.fingerprint, now, e.lease)
	if err != nil {
		e.logger.WarnContext(ctx, "idempotency front store unavailable; asking the durable tier", slog.Any("error", err))
		return false
	}
	switch d.Outcome {
	case Proceed:
		t.frontToken = d.Token
		return false
	case InUse:
		// The front's reservation may be one whose completion in the front
		// failed although the durable tier holds the answer: ask it rather
		// than answer 409 for a whole lease.
		if t.askLookup(ctx, now) {
			return true
		}
	}
	t.final(d)
	return true
}

// askLookup reads the durable record without a lock and reports whether
// it ended the request. An error here is met again, and reported, on the
// durable tier's write path.
func (t *Ticket) askLookup(ctx context.Context, now time.Time) bool {
	if t.e.lookup == nil {
		return false
	}
	rec, err := t.e.lookup(ctx, t.scope)
	if err != nil || rec == nil || rec.State != StateCompleted {
		return false
	}
	t.e.cache.put(t.scope, rec, now)
	if !t.decideOn(rec, now) {
		return false
	}
	t.fillFront(ctx, t.Decision)
	return true
}

// fillFront hands a durable replay to the front store's reservation, so
// that other processes find it there.
func (t *Ticket) fillFront(ctx context.Context, d Decision) {
	if t.frontToken == "" {
		return
	}
	if d.Outcome != Replay {
		t.releaseFront(ctx)
		return
	}
	t.completeFront(ctx, *d.Response, t.e.now())
}

// Decide confirms a transactional engine's provisional Proceed inside the
// caller's transaction. On Proceed the caller does its work and calls Put
// in the same transaction; anything else means the caller rolls back,
// answers with the returned Decision (which becomes the ticket's) and
// calls Release.
func (t *Ticket) Decide(ctx context.Context, tx TxRecords) (Decision, error) {
	d, err := tx.DecideIdempotency(ctx, t.scope, t.fingerprint, t.e.now())
	if err != nil {
		return Decision{}, fmt.Errorf("idempotency: decide: %w", err)
	}
	if d.Outcome == Proceed {
		t.token = d.Token
	} else {
		t.Decision = d
	}
	return d, nil
}

// Put writes resp as the key's answer inside the caller's transaction,
// after Decide said Proceed in it. Call Committed once that transaction
// has committed, Release if it did not.
func (t *Ticket) Put(ctx context.Context, tx TxRecords, resp Response) error {
	now := t.e.now()
	if err := tx.PutIdempotency(ctx, t.scope, t.fingerprint, t.token, resp, now, now.Add(t.e.ttl)); err != nil {
		return fmt.Errorf("idempotency: put: %w", err)
	}
	t.put, t.putAt = &resp, now
	return nil
}

// Committed ends a ticket whose answer is durable: written by Put in a
// transaction that committed, or stored by the caller itself (resp, when
// not nil, is then that answer). The answer goes to the replay cache and
// the front store.
func (t *Ticket) Committed(ctx context.Context, resp *Response) {
	if t.ended {
		return
	}
	// The answer is decided: a client gone must not stop its bookkeeping.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	at := t.putAt
	if resp != nil || t.put == nil {
		t.put, at = resp, t.e.now()
	}
	if t.put != nil {
		t.e.cache.put(t.scope, &Record{State: StateCompleted, Fingerprint: t.fingerprint,
			ExpiresAt: at.Add(t.e.ttl), Response: t.put}, at)
		t.completeFront(ctx, *t.put, at)
	}
	t.end(ctx)
}

// Complete stores resp in a two-step engine's durable store and ends the
// ticket. ErrReservationLost means another request took the key over
// after this one's lease ran out; its answer decides.
func (t *Ticket) Complete(ctx context.Context, resp Response) error {
	if t.e.store == nil {
		return errors.New("idempotency: Complete on a transactional engine (use Put and Committed)")
	}
	now := t.e.now()
	if err := t.e.store.Complete(ctx, t.scope, t.token, resp, now, now.Add(t.e.ttl)); err != nil {
		if errors.Is(err, ErrReservationLost) {
			t.token = "" // not ours to release
		}
		t.Release(ctx)
		return err
	}
	t.put, t.putAt = &resp, now
	t.Committed(ctx, nil)
	return nil
}

// Release ends a ticket whose answer was not stored (a 5xx, a panic, a
// rolled-back transaction): the key is free for a retry.
func (t *Ticket) Release(ctx context.Context) {
	if t.ended {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if t.e.store != nil && t.token != "" {
		if err := t.e.store.Release(ctx, t.scope, t.token); err != nil {
			// The reservation then ends with its lease.
			t.e.logger.ErrorContext(ctx, "idempotency: release key", slog.Any("error", err))
		}
	}
	t.releaseFront(ctx)
	t.end(ctx)
}

func (t *Ticket) end(context.Context) {
	t.ended = true
	if t.entered {
		t.entered = false
		t.e.running.leave(t.scope)
	}
}

func (t *Ticket) releaseFront(ctx context.Context) {
	if t.frontToken == "" {
		return
	}
	tok := t.frontToken
	t.frontToken = ""
	if err := t.e.front.Release(ctx, t.scope, tok); err != nil {
		t.e.logger.WarnContext(ctx, "idempotency: release front reservation", slog.Any("error", err))
	}
}

func (t *Ticket) completeFront(ctx context.Context, resp Response, at time.Time) {
	if t.frontToken == "" {
		return
	}
	tok := t.frontToken
	t.frontToken = ""
	if err := t.e.front.Complete(ctx, t.scope, tok, resp, at, at.Add(t.e.ttl)); err != nil {
		// Not fatal: the durable tier holds the answer. Drop the front's
		// reservation so that other processes ask the durable tier
		// instead of answering InUse until the lease ends.
		t.e.logger.WarnContext(ctx, "idempotency: store answer in the front store", slog.Any("error", err))
		if err := t.e.front.Release(ctx, t.scope, tok); err != nil {
			t.e.logger.WarnContext(ctx, "idempotency: release front reservation", slog.Any("error", err))
		}
	}
}

// release is Release on a ticket that may be nil (a request without a key).
func (t *Ticket) release(ctx context.Context) {
	if t != nil {
		t.Release(ctx)
	}
}

// positiveOr is v, or def when v is not positive: a setting left unset
// takes its default.
func positiveOr[T int | int64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}
