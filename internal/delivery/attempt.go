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

// Claimed is a send claimed for an attempt, with the relay session slot
// taken for it before the claim (nil when its transport bounds nothing).
type Claimed struct {
	Send *core.Send
	slot *transport.Slot
	// prep says the send's envelope on slot while the claim commits
	// (pipeline.go); nil when nothing is prepared.
	prep *slotPrep
}

// Claim takes up to n due sends for an attempt each. When the default
// transport is a relay with a bound on its sessions, it first takes a free
// session slot per send and claims no more sends than it got: a send is
// committed sending only with a session to hand it over on, so a crash
// cannot leave unknown a send that was only waiting in the pool. short
// reports that the slots, not n or the due sends, limited the claim.
// While it commits, the sessions say the envelopes (pipeline.go).
func (d *Deliverer) Claim(ctx context.Context, n int) (claimed []Claimed, short bool, err error) {
	slots, bounded := d.defaultSlots(n)
	if bounded {
		short = len(slots) < n
		if n = len(slots); n == 0 {
			return nil, true, nil
		}
	}
	var sends []*core.Send
	token := idempotency.NewToken()
	pl := d.newPipeline(ctx, slots)
	// Background: accepts waiting on the one writer come first (core.Background).
	err = d.store.InTx(core.Background(ctx), func(tx core.Tx) error {
		now := d.cfg.Now().UTC()
		var err error
		sends, err = tx.ClaimDue(ctx, core.ClaimParams{Now: now, Lease: d.lease(), Token: token, Limit: n})
		if err == nil {
			pl.start(sends) // before the commit, not waiting for it
		}
		return err
	})
	pl.seal()
	if err != nil {
		sends = nil
		err = fmt.Errorf("claim due sends: %w", err)
		pl.wait() // then releasing the slots discards the envelopes said
	}
	for i, s := range sends {
		c := Claimed{Send: s}
		if bounded {
			c.slot, c.prep = slots[i], pl.at(i)
		}
		claimed = append(claimed, c)
	}
	for _, sl := range slots[min(len(sends), len(slots)):] {
		sl.Release()
	}
	return claimed, short, err
}

// defaultSlots takes up to n free session slots of the default transport
// when it is a relay; bounded is false when it is not (capture, mx).
func (d *Deliverer) defaultSlots(n int) (slots []*transport.Slot, bounded bool) {
	if d.defaultKind != transport.Relay {
		return nil, false
	}
	t, err := d.smtpTransport(d.cfg.DefaultTransport, false)
	relay, ok := t.(*transport.SMTP)
	if err != nil || !ok {
		return nil, false
	}
	for range n {
		sl, ok := relay.TryAcquire()
		if !ok {
			break
		}
		slots = append(slots, sl)
	}
	return slots, true
}

// RunOnce claims the sends due now and runs their attempts one after the
// other; it returns how many it ran. Tests and tools drive delivery with
// it; the Scheduler runs attempts concurrently.
func (d *Deliverer) RunOnce(ctx context.Context) (int, error) {
	claimed, _, err := d.Claim(ctx, 100)
	for _, c := range claimed {
		d.Run(ctx, c)
	}
	return len(claimed), err
}

// errNoSession says a send's relay had no free session: the attempt was
// not begun, and the send goes back to the queue for a moment.
var errNoSession = errors.New("every session to the relay is in use")

// errLargeBusy says as many large messages as DefaultLargeAttempts were
// being handed over: the attempt was not begun, as with errNoSession.
var errLargeBusy = errors.New("as many large messages as this process hands over at once are being handed over")

// deferDelay is how long a send whose relay had no free session waits
// before it is due again.
const deferDelay = 500 * time.Millisecond

// Run makes the attempt of a claimed send and records its outcome. It is
// bounded by the attempt budget, inside the send's lease (grown with its
// size: lease.go), so that a healthy worker has recorded its outcome before
// the rescuer would call the send unknown. With tracing on it is the
// attempt's span (trace.go).
func (d *Deliverer) Run(ctx context.Context, c Claimed) {
	if !d.tracer.Enabled() {
		d.run(ctx, c)
		return
	}
	ctx, span := d.startAttempt(ctx, c.Send)
	o, h, err := d.run(ctx, c)
	endAttempt(span, d.kindOf(h), o, err)
}

// run is Run's attempt. It returns the outcome, what the handoff did, and
// the error that kept the outcome from being recorded.
func (d *Deliverer) run(ctx context.Context, c Claimed) (outcome, handoff, error) {
	c.prep.wait() // the envelope said ahead, or nothing under way on the slot
	s := c.Send
	if c.slot != nil {
		defer c.slot.Release() // unused (suppressed, another transport): back to the pool
	}
	ctx, cancel := context.WithTimeout(ctx, attemptBudget(d.leaseOf(s)))
	defer cancel()
	token := s.AttemptToken
	var h handoff
	skipped, all, derr := d.suppressed(ctx, s)
	if derr == nil && len(skipped) < len(all) {
		h = d.handOff(ctx, s, c.slot, skipped)
		derr = h.err
		if c.slot != nil {
			c.slot.Release()
		}
		if c.slot != nil && d.onSlotFree != nil {
			// The session is free for the next claim now, while this
			// outcome is written (on SQLite, in the same group commit).
			d.onSlotFree()
		}
	}
	o := outcomeOf(derr, s.Tries, d.cfg.MaxAttempts)
	o.attempted = true
	switch {
	case derr == nil && len(skipped) == len(all):
		// Nothing to attempt: the send ends suppressed (docs/api.md, "Statuses").
		// Each recipient's email.suppressed tells it; no event for the send.
		o = outcome{status: core.StatusSuppressed, metric: "suppressed",
			detail: "every recipient is on the suppression list: nothing was attempted"}
	case errors.Is(derr, errNoSession), errors.Is(derr, errLargeBusy):
		o = outcome{status: core.StatusQueued, deferred: true, detail: derr.Error()}
	case h.dests != nil:
		// Per destination (mx.go): each recipient's own outcome.
		o = d.mxOutcome(s, h.dests, skipped, all, d.cfg.Now().UTC())
	case h.mx && derr != nil:
		o = d.mxFailure(s, derr)
	case derr == nil && h.mx:
		// The recipients' own exchangers answered 250: delivered.
		o.status, o.delivered = core.StatusDelivered, true
	case len(h.refused) > 0 && transport.ClassOf(derr) == transport.Permanent:
		// Every recipient's own server refused it: each bounced (their
		// events say why), so the send is bounced, not failed.
		o = outcome{status: core.StatusBounced, reached: o.reached, attempted: true, metric: "permfail", detail: derr.Error()}
	}
	if !o.deferred {
		o.suppressed = skipped
		if h.dests == nil {
			o.refused = h.refused
		}
	}
	if err := d.record(ctx, s, token, o, h.inTx); err != nil {
		// The send stays sending: the rescuer will call it unknown, the
		// truth as far as the database knows.
		d.logger.ErrorContext(ctx, "record attempt result", slog.String("send_id", s.ID), slog.Any("error", err))
		return o, h, err
	}
	if o.metric != "" {
		d.count(o.metric)
	}
	if o.deferred {
		return o, h, nil
	}
	d.logger.LogAttrs(ctx, slog.LevelInfo, "delivery attempt",
		slog.String("send_id", s.ID), slog.Int("attempt", s.Tries), slog.Bool("ok", derr == nil && len(skipped) < len(all)),
		slog.String("outcome", o.metric))
	return o, h, nil
}

// handoff is what handing a message over did.
type handoff struct {
	err  error
	inTx func(core.Tx) error
	// mx: the mx transport took it, talking to the recipients' own
	// servers; refused are the recipients they refused for good.
	mx      bool
	refused []transport.Refusal
	// dests is what per-destination delivery did (mx).
	dests *mxHandoff
	// kind is the kind of transport it went to (the attempt's span);
	// "" when it got to none.
	kind string
}

// handOver is handOff's second half: sign, pick the transport, deliver.
func (d *Deliverer) handOver(ctx context.Context, s *core.Send, slot *transport.Slot, env transport.Envelope, raw []byte, from string) handoff {
	// The DKIM signature carries its signing time (t=): the one part of
	// the message that differs from one attempt to the next.
	raw, signed, err := d.svc.SignDKIM(ctx, s.Tenant, from, raw)
	if err != nil {
		// The key may be fixed (or the secret set) before the next attempt.
		// The error never contains key material.
		d.logger.WarnContext(ctx, "dkim signing failed", slog.String("send_id", s.ID), slog.Any("error", err))
		return handoff{err: &transport.Error{Class: transport.Temporary, Stage: "sign", Err: err}}
	}
	d.logger.LogAttrs(ctx, slog.LevelDebug, "handing over", slog.String("send_id", s.ID), slog.Bool("dkim_signed", signed))
	return d.route(ctx, s, slot, env, raw)
}

// route hands a signed message (or one copy of it) to the send's road:
// its failover chain, or its one transport.
func (d *Deliverer) route(ctx context.Context, s *core.Send, slot *transport.Slot, env transport.Envelope, raw []byte) handoff {
	if h, ok := d.handOverChain(ctx, s, slot, env, raw); ok {
		h.kind = kindChain
		return h
	}
	t, err := d.transportFor(ctx, s)
	if err != nil {
		return handoff{err: &transport.Error{Class: transport.Temporary, Stage: "dial", Err: err}}
	}
	h := d.handOverTo(ctx, s, slot, t, env, raw)
	h.kind = kindOf(t)
	return h
}

// handOverTo hands the signed message to t, the send's transport (nil:
// capture).
func (d *Deliverer) handOverTo(ctx context.Context, s *core.Send, slot *transport.Slot, t transport.Transport, env transport.Envelope, raw []byte) handoff {
	if t == nil { // capture
		now := d.cfg.Now().UTC()
		return handoff{inTx: func(tx core.Tx) error {
			return tx.InsertInboxMessage(ctx, &core.InboxMessage{
				ID: app.NewID("msg_"), Tenant: s.Tenant, SendID: s.ID, MessageID: s.MessageID,
				From: env.From, To: env.To, Subject: s.Subject, Raw: raw, ReceivedAt: now,
			})
		}}
	}
	if _, ok := t.(*transport.MX); ok {
		return d.handOverMX(ctx, s, env, raw)
	}
	relay, ok := t.(*transport.SMTP)
	if !ok {
		return handoff{err: t.Deliver(ctx, env, raw)}
	}
	if slot != nil && slot.Of(relay) {
		// Kept for the send's next copy; the attempt releases it.
		return handoff{err: slot.Send(ctx, env, raw)}
	}
	if slot != nil {
		slot.Release()
	}
	if slot, ok = relay.TryAcquire(); !ok {
		return handoff{err: errNoSession}
	}
	return handoff{err: slot.Deliver(ctx, env, raw)}
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
	// attempted: a handoff was tried (not so when every recipient is
	// suppressed).
	attempted bool
	// delivered: the recipients' own exchangers took it (mx): the
	// attempt's sent is followed by delivered.
	delivered bool
	// suppressed are the recipients left out because they are on the
	// suppression list (normalized addresses).
	suppressed []string
	// refused are the recipients their own servers refused for good (mx).
	refused []transport.Refusal
	retry   bool // queued again, after the backoff
	// deferred: no attempt was begun (no free relay session); the send is
	// due again after deferDelay, and the claim's try is given back.
	deferred bool
	metric   string // sendonce_delivery_attempts_total's outcome label
	// Per-destination delivery (mx.go): perRecipient events replace the
	// send's own delivered and delivery_delayed; states are the
	// recipients' new states and extra their events; retryAt, when set,
	// is when the send is due again; giveBack returns the claim's try (a
	// destination asked to slow down: not the message's failure).
	perRecipient bool
	states       []core.RecipientState
	extra        []core.Event
	retryAt      *time.Time
	giveBack     bool
}

// outcomeOf decides an attempt's outcome from the transport's error (nil:
// 250), the attempt's number (from 1) and the retry budget. It is the
// contract's section 5 as a function.
func outcomeOf(err error, attempt, maxAttempts int) outcome {
	if err == nil {
		return outcome{status: core.StatusSent, event: core.EventSent, reached: true, metric: "sent",
			detail: fmt.Sprintf("attempt %d accepted by the next hop", attempt)}
	}
	reached := false
	var terr *transport.Error
	if errors.As(err, &terr) {
		reached = terr.Reached
	}
	switch transport.ClassOf(err) {
	case transport.Permanent:
		return outcome{status: core.StatusFailed, event: core.EventFailed, detail: err.Error(), reached: reached, metric: "permfail"}
	case transport.Ambiguous:
		return outcome{status: core.StatusUnknown, event: core.EventUnknown, detail: err.Error(), reached: reached, metric: "unknown"}
	}
	if attempt >= maxAttempts {
		return outcome{status: core.StatusFailed, event: core.EventFailed, reached: reached, metric: "tempfail",
			detail: fmt.Sprintf("gave up after %d attempts: %v", attempt, err)}
	}
	return outcome{status: core.StatusQueued, event: core.EventAttemptFailed, detail: err.Error(), reached: reached,
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
	wctx, cancel := context.WithTimeout(core.Background(context.WithoutCancel(ctx)), recordBudget(d.leaseOf(s)))
	defer cancel()
	now := d.cfg.Now().UTC()
	var backoff time.Duration
	if o.retry {
		backoff = Backoff(d.cfg.RetryBase, d.cfg.MaxRetryDelay, s.Tries)
	}
	next := nextSend(s, o, now, backoff)
	write := func(tx core.Tx) error {
		held, err := tx.UpdateAttempt(wctx, &next, token)
		if err != nil {
			return err
		}
		if !held {
			return tx.AddEvent(wctx, s.ID, core.Event{Type: core.EventLateAttemptResult, At: now,
				Detail: "a late attempt result arrived after the lease: " + o.event + ": " + o.detail})
		}
		if inTx != nil {
			if err := inTx(tx); err != nil {
				return err
			}
		}
		if o.deferred {
			return nil // nothing happened to tell of
		}
		if o.status == core.StatusSent || o.delivered {
			// A connected mailbox's send is owed its Sent-folder copy
			// (internal/imapsync), in this same transaction.
			if err := tx.QueueIMAPAppend(wctx, s.Tenant, s.ID, s.MailboxID, now); err != nil {
				return err
			}
		}
		if err := recordSuppressed(wctx, tx, s.ID, o.suppressed, now); err != nil {
			return err
		}
		if err := recordRefused(wctx, tx, s, o.refused, now); err != nil {
			return err
		}
		if err := d.svc.GuardHandoffBounces(wctx, tx, s, refusedAddresses(o.refused), now); err != nil {
			return err
		}
		for _, st := range o.states {
			if err := tx.SetRecipient(wctx, s.ID, st); err != nil {
				return err
			}
		}
		if events := attemptEvents(s, o, &next, now); len(events) > 0 {
			return tx.AddEvent(wctx, s.ID, events...)
		}
		return nil
	}
	return d.retryWrite(wctx, write)
}

// nextSend is the send as the outcome leaves it: the claim released, the
// status and error set, the attempt counted when it reached the relay, and
// when it is due again (a retry after backoff, which only a retry reads;
// a deferred attempt after deferDelay, its try given back).
func nextSend(s *core.Send, o outcome, now time.Time, backoff time.Duration) core.Send {
	next := *s
	next.AttemptToken, next.LeaseUntil, next.UpdatedAt = "", nil, now
	next.Status, next.LastError = o.status, o.detail
	if o.reached {
		next.Attempts++
	}
	switch {
	case o.status == core.StatusSent || o.status == core.StatusDelivered || o.delivered:
		next.SentAt, next.LastError = &now, ""
	case o.deferred:
		at := now.Add(deferDelay)
		if o.retryAt != nil && o.retryAt.After(now) {
			at = *o.retryAt
		}
		next.NextAttemptAt, next.Tries, next.LastError = &at, s.Tries-1, s.LastError
	case o.retry:
		at := now.Add(backoff)
		if o.retryAt != nil {
			at = *o.retryAt
		}
		next.NextAttemptAt = &at
		if o.giveBack {
			next.Tries = s.Tries - 1
		}
	}
	return next
}

// attemptEvents is the history an outcome adds to its send (next is the
// send as nextSend left it). The attempt's start is written with its
// outcome: a claim that dies before the outcome leaves the rescuer's
// unknown instead.
func attemptEvents(s *core.Send, o outcome, next *core.Send, now time.Time) []core.Event {
	if o.deferred {
		return nil
	}
	if !o.attempted {
		if o.event == "" {
			return nil
		}
		return []core.Event{{Type: o.event, At: now, Detail: o.detail}}
	}
	events := []core.Event{{Type: core.EventAttemptStarted, At: s.UpdatedAt, Detail: fmt.Sprintf("attempt %d", s.Tries)}}
	if o.event != "" { // a bounced send's recipients' events tell it
		events = append(events, core.Event{Type: o.event, At: now, Detail: o.detail})
	}
	if o.delivered {
		events = append(events, core.Event{Type: core.EventDelivered, At: now,
			Detail: "accepted by the recipients' mail exchangers"})
	}
	if o.retry && !o.perRecipient {
		// attempt_failed is the attempt's own history; the contract's
		// email.delivery_delayed (a temporary failure, a retry scheduled)
		// is what a webhook subscriber is told.
		events = append(events, core.Event{Type: core.EventDeliveryDelayed, At: now,
			Detail: "retry due " + next.NextAttemptAt.UTC().Format(time.RFC3339) + ": " + o.detail})
	}
	return append(events, o.extra...)
}

// retryWrite runs write in a transaction until it commits or ctx ends: a
// database that fails for a moment must not turn a known outcome into
// unknown.
func (d *Deliverer) retryWrite(ctx context.Context, write func(core.Tx) error) error {
	wait := 50 * time.Millisecond
	for {
		err := d.store.InTx(ctx, write)
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}
