package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sendonce/sendonce/client"
)

// Run works on due tasks with Config.Workers workers until ctx is done, then
// returns nil once every worker has stopped. A task in flight when ctx ends
// goes back to pending at once (its attempt not counted); its next attempt
// carries the same key, so the server replays whatever this one did.
// Database errors are logged and retried after the poll interval; they do
// not stop Run.
func (o *Outbox) Run(ctx context.Context) error {
	if o.cfg.Client == nil {
		return errors.New("outbox: Run needs Config.Client")
	}
	var wg sync.WaitGroup
	for range o.cfg.Workers {
		wg.Go(func() { o.work(ctx) })
	}
	wg.Wait()
	return nil
}

func (o *Outbox) work(ctx context.Context) {
	failures := 0
	for ctx.Err() == nil {
		did, err := o.ProcessNext(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			failures++
			o.cfg.Logger.ErrorContext(ctx, "outbox worker", slog.Any("error", err))
			// Back off on a failing database, up to 30 poll intervals.
			o.idle(ctx, o.cfg.PollInterval*time.Duration(min(failures, 30)))
		case !did:
			failures = 0
			o.idle(ctx, o.cfg.PollInterval)
		default:
			failures = 0
		}
	}
}

func (o *Outbox) idle(ctx context.Context, d time.Duration) {
	d += time.Duration(rand.Int64N(int64(d)/5 + 1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// outcome is what an attempt decided.
type outcome struct {
	state      State
	err        error
	code       string
	send       *client.Send
	next       time.Time
	uncount    bool // the attempt was interrupted by our own shutdown
	lookedUp   bool
	retryAfter time.Duration
}

// ProcessNext claims one due task, works on it and records the outcome. It
// reports whether there was a task. Run calls it in a loop; tests and
// cron-style callers may call it directly.
func (o *Outbox) ProcessNext(ctx context.Context) (bool, error) {
	if o.cfg.Client == nil {
		return false, errors.New("outbox: ProcessNext needs Config.Client")
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	now := o.cfg.Now()
	token := uuid.NewString()
	// Not ctx: a claim that committed must be seen, or the task would sit
	// in sending until its lease ran out.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	rec, err := scanRecord(o.db.QueryRowContext(cctx, o.q(qClaim),
		micros(now.Add(o.cfg.Lease)), token, o.cfg.WorkerID, micros(now), micros(now),
		micros(now), micros(now), micros(now), micros(now)))
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("outbox: claim: %w", err)
	}
	log := o.cfg.Logger.With(slog.String("task", rec.ID), slog.String("key", rec.IdempotencyKey), slog.Int("attempt", rec.Attempts))
	var reclaimErr error
	if rec.PrevState == Sending {
		reclaimErr = errors.New("the previous worker's lease ran out mid-attempt; its outcome is unknown")
		log.WarnContext(ctx, "outbox task taken over from a dead worker")
	}
	o.emit(Transition{Task: *rec, From: rec.PrevState, To: Sending, Err: reclaimErr})

	var out outcome
	switch {
	case rec.Attempts > o.cfg.MaxAttempts:
		out = outcome{state: NeedsReconciliation, err: fmt.Errorf("%d attempts made, the outcome of the last is unknown", rec.Attempts-1)}
	case !now.Before(rec.Deadline):
		out = outcome{state: NeedsReconciliation, err: fmt.Errorf("task older than its bound (%v) and not known to be sent", o.cfg.MaxAge)}
	default:
		out = o.attempt(ctx, rec, now)
	}
	if out.state == Pending && !out.uncount {
		out.next = o.nextAttempt(rec.Attempts, out.retryAfter)
		if rec.Attempts >= o.cfg.MaxAttempts || !out.next.Before(rec.Deadline) {
			out.state = NeedsReconciliation
			out.err = fmt.Errorf("gave up after %d attempts with the outcome unknown: %w", rec.Attempts, out.err)
		}
	}
	after, err := o.finish(rec, token, out)
	if err != nil {
		return true, err
	}
	if after == nil {
		log.WarnContext(ctx, "outbox lease lost before the outcome was recorded; the new holder decides")
		return true, nil
	}
	log.InfoContext(ctx, "outbox task", slog.String("state", string(after.State)), slog.String("send", after.SendID), slog.Any("error", out.err))
	o.emit(Transition{Task: *after, From: Sending, To: after.State, Err: out.err, LookedUp: out.lookedUp})
	return true, nil
}

// attempt sends the task's stored body with its stored key, within the
// lease.
func (o *Outbox) attempt(ctx context.Context, rec *Record, now time.Time) outcome {
	cctx, cancel := context.WithDeadline(ctx, now.Add(o.cfg.Lease*4/5))
	defer cancel()
	c := o.cfg.Client
	if rec.Attempts > 1 && now.Sub(rec.FirstAttemptAt) >= o.cfg.KeyTTL/2 {
		// The server may have forgotten the key: a POST could be a new
		// send. Look it up first.
		s, found, err := c.SendByKey(cctx, rec.IdempotencyKey)
		if err != nil {
			return o.unknown(ctx, fmt.Errorf("look up key before a late retry: %w", err))
		}
		if found {
			return outcome{state: Sent, send: s, lookedUp: true}
		}
	}
	s, err := c.SendRaw(cctx, rec.Payload, &client.SendOptions{IdempotencyKey: rec.IdempotencyKey})
	switch {
	case err == nil:
		return outcome{state: Sent, send: s}
	case client.IsRejected(err):
		return outcome{state: Rejected, err: err, code: client.ErrorCode(err)}
	default:
		return o.unknown(ctx, err)
	}
}

// unknown is an attempt without a final answer: retry later with the same
// key (or, on shutdown, at once).
func (o *Outbox) unknown(ctx context.Context, err error) outcome {
	if ctx.Err() != nil {
		return outcome{state: Pending, err: fmt.Errorf("interrupted by shutdown: %w", err), uncount: true, next: o.cfg.Now()}
	}
	out := outcome{state: Pending, err: err, code: client.ErrorCode(err)}
	var e *client.Error
	if errors.As(err, &e) {
		out.retryAfter = e.RetryAfter
	}
	return out
}

// nextAttempt: a random time between half and all of
// min(RetryMax, RetryBase·2^(n−1)), or Retry-After if longer.
func (o *Outbox) nextAttempt(n int, retryAfter time.Duration) time.Time {
	d := o.cfg.RetryMax
	if n-1 < 32 {
		if e := o.cfg.RetryBase << (n - 1); e > 0 && e < d {
			d = e
		}
	}
	d = d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
	return o.cfg.Now().Add(max(d, retryAfter))
}

// finish records the outcome if this worker still holds the lease; nil
// when it does not. It runs even when ctx has ended: the outcome must not
// be lost to a shutdown.
func (o *Outbox) finish(rec *Record, token string, out outcome) (*Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := o.cfg.Now()
	lastErr, code := rec.LastError, rec.LastErrorCode
	if out.err != nil {
		lastErr, code = out.err.Error(), out.code
	}
	var sendID, sendStatus string
	if out.send != nil {
		sendID, sendStatus = out.send.ID, string(out.send.Status)
	}
	next := out.next
	if next.IsZero() {
		next = rec.NextAttemptAt
	}
	delta := 0
	if out.uncount {
		delta = -1
	}
	after, err := scanRecord(o.db.QueryRowContext(ctx, o.q(qFinish),
		string(out.state), lastErr, code, sendID, sendStatus, micros(next), delta, micros(now), rec.ID, token))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: record outcome of %s (%s): %w", rec.ID, out.state, err)
	}
	return after, nil
}
