package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/transport"
)

// An attempt is three steps: Claim (one statement marks a batch of due
// sends sending, committed before any handoff, so a crash leaves a trace
// the rescuer turns into unknown), handOff (the transport), and record (the
// outcome, decided by the pure function outcomeOf, written only while the
// claim still holds the send).

// Claim takes up to n due sends for an attempt each.
func (d *Deliverer) Claim(ctx context.Context, n int) ([]*core.Send, error) {
	var sends []*core.Send
	token := idempotency.NewToken()
	err := d.store.InTx(ctx, func(tx core.Tx) error {
		now := d.cfg.Now().UTC()
		var err error
		sends, err = tx.ClaimDue(ctx, now, now.Add(d.cfg.AttemptLease), token, n)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim due sends: %w", err)
	}
	return sends, nil
}

// RunOnce claims the sends due now and runs their attempts one after the
// other; it returns how many it ran. Tests and tools drive delivery with
// it; the Scheduler runs attempts concurrently.
func (d *Deliverer) RunOnce(ctx context.Context) (int, error) {
	sends, err := d.Claim(ctx, 100)
	for _, s := range sends {
		d.Run(ctx, s)
	}
	return len(sends), err
}

// Run makes the attempt of a claimed send and records its outcome. It is
// bounded by the attempt budget, inside the lease, so that a healthy worker
// has recorded its outcome before the rescuer would call the send unknown.
func (d *Deliverer) Run(ctx context.Context, s *core.Send) {
	ctx, cancel := context.WithTimeout(ctx, attemptBudget(d.cfg.AttemptLease))
	defer cancel()
	token := s.AttemptToken
	var (
		derr    error
		inTx    func(core.Tx) error
		skipped string
	)
	skipped, derr = d.suppressed(ctx, s)
	if derr == nil && skipped == "" {
		derr, inTx = d.handOff(ctx, s)
	}
	o := outcomeOf(derr, s.Tries, d.cfg.MaxAttempts)
	o.attempted = true
	if skipped != "" {
		o = outcome{status: core.StatusFailed, event: "suppressed", detail: "recipient is suppressed: " + skipped}
	}
	if err := d.record(ctx, s, token, o, inTx); err != nil {
		// The send stays sending: the rescuer will call it unknown, the
		// truth as far as the database knows.
		d.logger.ErrorContext(ctx, "record attempt result", slog.String("send_id", s.ID), slog.Any("error", err))
		return
	}
	if o.metric != "" {
		d.count(o.metric)
	}
	d.logger.LogAttrs(ctx, slog.LevelInfo, "delivery attempt",
		slog.String("send_id", s.ID), slog.Int("attempt", s.Tries), slog.Bool("ok", derr == nil && skipped == ""),
		slog.String("outcome", o.metric))
}

// handOff gives the message to its transport. The capture transport keeps
// it in the database: its handoff is a write that joins the outcome's
// transaction (inTx), so the message is kept exactly when the send is
// recorded sent.
func (d *Deliverer) handOff(ctx context.Context, s *core.Send) (err error, inTx func(core.Tx) error) {
	raw, env, err := Render(s)
	if err != nil {
		return &transport.Error{Class: transport.Permanent, Stage: "render", Err: err}, nil
	}
	// The DKIM signature carries its signing time (t=): the one part of
	// the message that differs from one attempt to the next.
	raw, signed, err := d.svc.SignDKIM(ctx, s.Tenant, env.From, raw)
	if err != nil {
		// The key may be fixed (or the secret set) before the next attempt.
		// The error never contains key material.
		d.logger.WarnContext(ctx, "dkim signing failed", slog.String("send_id", s.ID), slog.Any("error", err))
		return &transport.Error{Class: transport.Temporary, Stage: "sign", Err: err}, nil
	}
	t, err := d.transportFor(ctx, s)
	if err != nil {
		return &transport.Error{Class: transport.Temporary, Stage: "dial", Err: err}, nil
	}
	if t == nil { // capture
		now := d.cfg.Now().UTC()
		return nil, func(tx core.Tx) error {
			return tx.InsertInboxMessage(ctx, &core.InboxMessage{
				ID: app.NewID("msg_"), Tenant: s.Tenant, SendID: s.ID, MessageID: s.MessageID,
				From: env.From, To: env.To, Subject: s.Subject, Raw: raw, ReceivedAt: now,
			})
		}
	}
	d.logger.LogAttrs(ctx, slog.LevelDebug, "handing over", slog.String("send_id", s.ID), slog.Bool("dkim_signed", signed))
	return t.Deliver(ctx, env, raw), nil
}

// recordBudget is how long an attempt's outcome may take to be written:
// the margin attemptBudget leaves inside the lease, at least a second.
func recordBudget(lease time.Duration) time.Duration {
	return max(lease-attemptBudget(lease), time.Second)
}

// outcome is what an attempt's result does to its send.
type outcome struct {
	status  core.Status
	event   string
	detail  string
	reached bool // the attempt reached the relay: counted in attempts
	// attempted: a handoff was tried (not so for a suppressed recipient).
	attempted bool
	retry     bool   // queued again, after the backoff
	metric    string // sendonce_delivery_attempts_total's outcome label
}

// outcomeOf decides an attempt's outcome from the transport's error (nil:
// 250), the attempt's number (from 1) and the retry budget. It is the
// contract's section 5 as a function.
func outcomeOf(err error, attempt, maxAttempts int) outcome {
	if err == nil {
		return outcome{status: core.StatusSent, event: "sent", reached: true, metric: "sent",
			detail: fmt.Sprintf("attempt %d accepted by the next hop", attempt)}
	}
	reached := false
	var terr *transport.Error
	if errors.As(err, &terr) {
		reached = terr.Reached
	}
	switch transport.ClassOf(err) {
	case transport.Permanent:
		return outcome{status: core.StatusFailed, event: "failed", detail: err.Error(), reached: reached, metric: "permfail"}
	case transport.Ambiguous:
		return outcome{status: core.StatusUnknown, event: "unknown", detail: err.Error(), reached: reached, metric: "unknown"}
	}
	if attempt >= maxAttempts {
		return outcome{status: core.StatusFailed, event: "failed", reached: reached, metric: "tempfail",
			detail: fmt.Sprintf("gave up after %d attempts: %v", attempt, err)}
	}
	return outcome{status: core.StatusQueued, event: "attempt_failed", detail: err.Error(), reached: reached,
		retry: true, metric: "tempfail"}
}

// record writes the outcome while the claim (token) still holds the send;
// inTx, when not nil, joins the transaction. A claim that no longer holds
// the send — its lease ran out and the rescuer declared it unknown, maybe
// reconciled since — changes nothing: reconcile is the only way out of
// unknown, so the late result is kept as an event for whoever decides.
func (d *Deliverer) record(ctx context.Context, s *core.Send, token string, o outcome, inTx func(core.Tx) error) error {
	// Written even when the attempt's own context ended, and within the
	// lease: losing it would turn a known result into unknown.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordBudget(d.cfg.AttemptLease))
	defer cancel()
	now := d.cfg.Now().UTC()
	next := *s
	next.AttemptToken, next.LeaseUntil, next.UpdatedAt = "", nil, now
	next.Status, next.LastError = o.status, o.detail
	if o.reached {
		next.Attempts++
	}
	switch {
	case o.status == core.StatusSent:
		next.SentAt, next.LastError = &now, ""
	case o.retry:
		at := now.Add(Backoff(d.cfg.RetryBase, d.cfg.MaxRetryDelay, s.Tries))
		next.NextAttemptAt = &at
	}
	write := func(tx core.Tx) error {
		held, err := tx.UpdateAttempt(wctx, &next, token)
		if err != nil {
			return err
		}
		if !held {
			return tx.AddEvent(wctx, s.ID, core.Event{Type: "late_attempt_result", At: now,
				Detail: "a late attempt result arrived after the lease: " + o.event + ": " + o.detail})
		}
		if inTx != nil {
			if err := inTx(tx); err != nil {
				return err
			}
		}
		if !o.attempted {
			return tx.AddEvent(wctx, s.ID, core.Event{Type: o.event, At: now, Detail: o.detail})
		}
		// The attempt's start is written with its outcome: a claim that
		// dies before the outcome leaves the rescuer's unknown instead.
		return tx.AddEvent(wctx, s.ID,
			core.Event{Type: "attempt_started", At: s.UpdatedAt, Detail: fmt.Sprintf("attempt %d", s.Tries)},
			core.Event{Type: o.event, At: now, Detail: o.detail})
	}
	// A database that fails for a moment must not turn a known outcome
	// into unknown: keep trying until the write budget ends.
	wait := 50 * time.Millisecond
	for {
		err := d.store.InTx(wctx, write)
		if err == nil || wctx.Err() != nil {
			return err
		}
		select {
		case <-wctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}
