package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/transport"
)

// Delivery under --transport mx is per destination (docs/deliverability.md,
// "Destinations"): an attempt hands the message to each destination of the
// recipients not done yet, one SMTP transaction each, and every
// destination's outcome is its recipients' own. What a recipient's own
// server accepted is recorded before the next destination's handoff, so no
// crash, retry or reconcile ever sends it to that recipient again; a
// temporary failure at one destination retries that destination only; an
// ambiguous handoff leaves its recipients unknown and the others go on.

// DefaultMaxQueueLifetime is how long a send may wait to be delivered to
// a destination under mx before it fails there (as Postfix's
// maximal_queue_lifetime).
const DefaultMaxQueueLifetime = 120 * time.Hour

// doneStatus reports whether a recipient in this state is never
// attempted again by itself.
func doneStatus(st core.Status) bool {
	switch st {
	case core.StatusQueued, core.RecipientDelayed, "":
		return false
	}
	return true
}

// mxHandoff is what per-destination delivery did in one attempt.
type mxHandoff struct {
	prior   map[string]core.RecipientState // states before the attempt
	refused []transport.Refusal            // domains that take no mail
	dests   []*destDone
	// lost: a checkpoint found the claim gone; later destinations were
	// not attempted.
	lost bool
	// copies: the send goes out as one copy per recipient (copies.go),
	// each a destination of its own; its recipients' states are always
	// written. exhausted: those copies went through a relay or a provider
	// and the attempts are used up (--max-attempts, not the queue
	// lifetime, bounds them).
	copies, exhausted bool
}

// destDone is one destination's outcome; recorded when a checkpoint
// wrote it already.
type destDone struct {
	d        *transport.Destination
	o        transport.DestOutcome
	recorded bool
	// accepted is what o.Delivered become: delivered (a recipient's own
	// exchanger), or sent (a copy a relay or a provider took).
	accepted core.Status
	// failed were failed for good by a transport, not refused by their
	// servers (a copy's relay refused the session).
	failed []transport.Refusal
}

// pendingOf returns the envelope recipients still to be attempted and the
// states stored before this attempt. They are read at every attempt: an
// attempt cut off by a crash after a destination took the message left
// its recipients' states and nothing else (no attempt counted), and a
// reconcile resends to those not done only.
func (d *Deliverer) pendingOf(ctx context.Context, s *core.Send, to []string) ([]string, map[string]core.RecipientState, error) {
	prior := map[string]core.RecipientState{}
	states, err := d.store.SendRecipients(ctx, s.ID)
	if err != nil {
		return nil, nil, err
	}
	for _, r := range states {
		prior[r.Address] = r
	}
	pending := slices.DeleteFunc(slices.Clone(to), func(r string) bool {
		st, ok := prior[core.NormalizeAddress(r)]
		return ok && doneStatus(st.Status)
	})
	return pending, prior, nil
}

// handOverMX delivers to each destination in turn. Before a destination's
// handoff, what earlier destinations of this attempt accepted is written
// (checkpoint), under the claim's token.
func (d *Deliverer) handOverMX(ctx context.Context, s *core.Send, env transport.Envelope, raw []byte) handoff {
	pending, prior, err := d.pendingOf(ctx, s, env.To)
	if err != nil {
		return handoff{mx: true, err: &transport.Error{Class: transport.Temporary, Stage: "read", Err: err}}
	}
	h := &mxHandoff{prior: prior}
	if len(pending) == 0 {
		return handoff{mx: true, dests: h}
	}
	dests, refused, err := d.mx.Plan(ctx, pending)
	if err != nil {
		return handoff{mx: true, err: err}
	}
	h.refused = refused
	for _, dst := range dests {
		if ctx.Err() != nil {
			// Out of time: the rest waits for the next attempt.
			h.dests = append(h.dests, &destDone{d: dst, o: transport.DestOutcome{Waiting: dst.Rcpts, Why: "the attempt ran out of time"}})
			continue
		}
		if err := d.checkpoint(ctx, s, h); err != nil {
			if errors.Is(err, errClaimLost) {
				h.lost = true
				return handoff{mx: true, dests: h}
			}
			h.dests = append(h.dests, &destDone{d: dst, o: transport.DestOutcome{Waiting: dst.Rcpts, Why: "checkpoint failed: " + err.Error()}})
			continue
		}
		dst.Stream = string(s.Stream) // its egress pool
		d.sites.note(s.Tenant, dst.Site, d.cfg.Now())
		o := d.mx.Send(ctx, dst, env.FromOf(dst.Rcpts), raw) // one recipient: its own bounce address
		h.dests = append(h.dests, &destDone{d: dst, o: o})
		d.logger.LogAttrs(ctx, slog.LevelDebug, "destination", slog.String("send_id", s.ID), slog.String("destination", dst.Site),
			slog.Int("delivered", len(o.Delivered)), slog.Int("deferred", len(o.Deferred)), slog.Int("refused", len(o.Refused)),
			slog.Int("unknown", len(o.Unknown)), slog.Int("waiting", len(o.Waiting)), slog.String("tls", o.TLS))
		if o.SlowDown != "" {
			if d.metrics != nil {
				d.metrics.DestinationThrottles.WithLabelValues(o.SlowDown).Inc()
			}
			d.logger.WarnContext(ctx, "destination throttled", slog.String("destination", dst.Site), slog.String("action", o.SlowDown),
				slog.String("reply", o.Reply), slog.Time("until", o.RetryAt))
		}
		if o.Resumed {
			if d.metrics != nil {
				d.metrics.DestinationResumes.Inc()
			}
			d.logger.InfoContext(ctx, "destination resumed", slog.String("destination", dst.Site))
		}
	}
	return handoff{mx: true, dests: h}
}

// Destinations is this process's mx destinations and their shaping now,
// every tenant's (the operator's view: tests, metrics; a tenant sees
// TenantDestinations).
func (d *Deliverer) Destinations() []transport.SiteStatus { return d.mx.Sites() }

var errClaimLost = errors.New("the attempt's claim no longer holds the send")

// checkpoint writes what earlier destinations of the attempt handed over
// (delivered or unknown recipients) before another destination is tried.
func (d *Deliverer) checkpoint(ctx context.Context, s *core.Send, h *mxHandoff) error {
	var todo []*destDone
	for _, dd := range h.dests {
		if !dd.recorded && len(dd.o.Delivered)+len(dd.o.Unknown) > 0 {
			todo = append(todo, dd)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordBudget(d.leaseOf(s)))
	defer cancel()
	now := d.cfg.Now().UTC()
	err := d.retryWrite(wctx, func(tx core.Tx) error {
		cur, err := tx.SendForUpdate(wctx, s.ID)
		if err != nil {
			return err
		}
		if cur.Status != core.StatusSending || cur.AttemptToken != s.AttemptToken {
			return errClaimLost
		}
		var events []core.Event
		for _, dd := range todo {
			states, evs := handedOver(dd, now)
			for _, st := range states {
				if err := tx.SetRecipient(wctx, s.ID, st); err != nil {
					return err
				}
			}
			events = append(events, evs...)
		}
		return tx.AddEvent(wctx, s.ID, events...)
	})
	if errors.Is(err, errClaimLost) {
		return errClaimLost
	}
	if err == nil {
		for _, dd := range todo {
			dd.recorded = true
		}
	}
	return err
}

// handedOver is the recipient states and events of a destination's
// accepted (delivered, or sent when a relay or provider took the copy)
// and unknown recipients.
func handedOver(dd *destDone, now time.Time) ([]core.RecipientState, []core.Event) {
	var (
		states []core.RecipientState
		events []core.Event
	)
	detail := "accepted by " + dd.d.Site
	if dd.o.TLS != "" {
		detail += " (TLS: " + dd.o.TLS + ")"
	}
	status, event, eventDetail := core.StatusDelivered, core.EventDelivered, detail
	if dd.accepted == core.StatusSent {
		// Copies a relay or a provider took are sent: the next hop has
		// them; delivered is for the recipient's own server to say.
		status, event, eventDetail = core.StatusSent, core.EventHandoff, "this recipient's copy "+detail
	}
	for _, r := range dd.o.Delivered {
		a := core.NormalizeAddress(r)
		states = append(states, core.RecipientState{Address: a, Status: status, Detail: detail, UpdatedAt: now})
		events = append(events, core.Event{Type: event, At: now, Recipient: a, Detail: eventDetail})
	}
	for _, r := range dd.o.Unknown {
		a := core.NormalizeAddress(r.Recipient)
		states = append(states, core.RecipientState{Address: a, Status: core.StatusUnknown, Detail: r.Err.Error(), UpdatedAt: now})
		events = append(events, core.Event{Type: core.EventUnknown, At: now, Recipient: a, Detail: r.Err.Error()})
	}
	return states, events
}

// mxOutcome decides what an attempt under mx does to its send, from each
// destination's outcome and the recipients' earlier states.
func (d *Deliverer) mxOutcome(s *core.Send, h *mxHandoff, skipped, all []string, now time.Time) outcome {
	deadline := dueAt(s).Add(d.cfg.MaxQueueLifetime)
	t := &mxTally{final: map[string]core.Status{}, slowOnly: true, now: now, expired: !now.Before(deadline) || h.exhausted,
		giveUp: fmt.Sprintf("not delivered within the queue lifetime (%v)", d.cfg.MaxQueueLifetime)}
	if h.exhausted {
		t.giveUp = fmt.Sprintf("gave up after %d attempts", s.Tries)
	}
	for a, st := range h.prior {
		t.final[a] = st.Status
	}
	for _, dd := range h.dests {
		t.add(dd)
	}
	for _, r := range h.refused {
		t.final[core.NormalizeAddress(r.Recipient)] = core.StatusBounced
	}
	o := outcome{attempted: true, reached: t.reached, suppressed: skipped, refused: h.refused, perRecipient: true}
	for _, dd := range h.dests {
		o.refused = append(o.refused, dd.o.Refused...)
		for _, r := range dd.o.Refused {
			t.final[core.NormalizeAddress(r.Recipient)] = core.StatusBounced
		}
	}
	if h.lost {
		// The rescuer decided meanwhile: keep what happened as events.
		o.status, o.detail = core.StatusUnknown, "the attempt's lease ran out between two destinations"
		return o
	}
	if !t.reached && len(t.delivered)+len(t.unknown)+len(t.delayed)+len(t.failed)+len(o.refused) == 0 && len(t.waiting) > 0 {
		// Nothing was begun: the destinations' shaping said wait.
		at := t.retryAt
		return outcome{status: core.StatusQueued, deferred: true, retryAt: &at, detail: t.lastErr}
	}
	legacy := !h.copies && (len(h.prior) == 0 || onlySuppressed(h.prior)) && !slices.ContainsFunc(h.dests, func(dd *destDone) bool { return dd.recorded })
	if t.lastErr == "" && len(o.refused) > 0 {
		t.lastErr = o.refused[len(o.refused)-1].Err.Error()
	}
	o.states, o.extra = t.states, t.events
	if len(t.delayed)+len(t.waiting) > 0 {
		d.mxPending(&o, t, s, deadline, legacy)
	} else {
		mxSettled(&o, t, all, skipped, legacy)
	}
	return o
}

// mxTally gathers one mx attempt's destinations: each recipient's fate,
// the states and events to write, and when to come back.
type mxTally struct {
	final                                        map[string]core.Status // this attempt's or earlier
	delivered, unknown, delayed, waiting, failed []string
	reached, slowOnly, expired                   bool
	retryAt, now                                 time.Time
	giveUp                                       string // why an expired deferral fails
	lastErr                                      string
	tlsNote                                      []string
	states                                       []core.RecipientState
	events                                       []core.Event
}

func (t *mxTally) earliest(at time.Time) {
	if !at.IsZero() && (t.retryAt.IsZero() || at.Before(t.retryAt)) {
		t.retryAt = at
	}
}

// add folds in one destination's outcome.
func (t *mxTally) add(dd *destDone) {
	o := dd.o
	t.reached = t.reached || o.Reached
	took := core.StatusDelivered
	if dd.accepted == core.StatusSent {
		took = core.StatusSent
	}
	for _, r := range o.Delivered {
		t.delivered = append(t.delivered, core.NormalizeAddress(r))
		t.final[core.NormalizeAddress(r)] = took
	}
	for _, r := range o.Unknown {
		t.unknown = append(t.unknown, core.NormalizeAddress(r.Recipient))
		t.final[core.NormalizeAddress(r.Recipient)] = core.StatusUnknown
		t.lastErr = r.Err.Error()
	}
	if o.TLS != "" {
		t.tlsNote = append(t.tlsNote, dd.d.Site+": "+o.TLS)
	}
	if !dd.recorded {
		st, ev := handedOver(dd, t.now)
		t.states, t.events = append(t.states, st...), append(t.events, ev...)
	}
	for _, r := range dd.failed {
		t.fail(r.Recipient, r.Err.Error(), nil)
	}
	for _, r := range o.Deferred {
		t.deferred(r)
	}
	if len(o.Deferred) > 0 {
		if o.SlowDown != "" {
			t.earliest(o.RetryAt)
		} else {
			t.slowOnly = false
		}
	}
	for _, r := range o.Waiting {
		t.waiting = append(t.waiting, core.NormalizeAddress(r))
	}
	if len(o.Waiting) > 0 {
		t.earliest(o.RetryAt)
		if t.lastErr == "" {
			t.lastErr = o.Why
		}
	}
}

// deferred records a recipient a destination deferred: failed when the
// queue lifetime is over, else delayed (retried).
func (t *mxTally) deferred(r transport.Refusal) {
	a, now := core.NormalizeAddress(r.Recipient), t.now
	t.lastErr = r.Err.Error()
	if t.expired {
		t.fail(a, fmt.Sprintf("%s: %v", t.giveUp, r.Err), &core.Bounce{Type: core.BounceTransient, SubType: "General", Status: "4.4.7",
			Message: "delivery time expired", DiagnosticCode: []string{r.Err.Error()}})
		return
	}
	t.delayed = append(t.delayed, a)
	t.final[a] = core.RecipientDelayed
	status, diag := replyOf(r.Err)
	status = "4" + strings.TrimPrefix(status, "5")
	t.states = append(t.states, core.RecipientState{Address: a, Status: core.RecipientDelayed, Detail: r.Err.Error(), UpdatedAt: now})
	t.events = append(t.events, core.Event{Type: core.EventDeliveryDelayed, At: now, Recipient: a, Detail: r.Err.Error(),
		Bounce: &core.Bounce{Type: core.BounceTransient, SubType: "General", Status: status,
			Message: "the recipient's mail server deferred the message; it is retried", DiagnosticCode: []string{diag}}})
}

// mxPending is the outcome of an attempt that leaves recipients to retry.
func (d *Deliverer) mxPending(o *outcome, t *mxTally, s *core.Send, deadline time.Time, legacy bool) {
	now := t.now
	o.status, o.retry, o.metric = core.StatusQueued, true, "tempfail"
	if len(t.delayed) > 0 && !t.slowOnly {
		t.earliest(now.Add(Backoff(d.cfg.RetryBase, d.cfg.MaxRetryDelay, s.Tries)))
	}
	retryAt := t.retryAt
	if retryAt.IsZero() || retryAt.Before(now) {
		retryAt = now.Add(deferDelay)
	}
	if retryAt.After(deadline) {
		retryAt = deadline
	}
	o.retryAt = &retryAt
	o.detail = t.lastErr
	if len(t.delayed) > 0 {
		o.event = core.EventAttemptFailed
	}
	if len(t.delayed) > 0 && t.slowOnly && len(t.delivered)+len(t.unknown) == 0 {
		o.giveBack = true // the destination asked to slow down: not the message's failure
	}
	if legacy && len(t.delivered)+len(t.unknown)+len(t.failed) == 0 && len(t.waiting) == 0 {
		// Every recipient deferred, nothing handed over: the send's
		// own events, as a relay's retry has them.
		o.states, o.extra, o.perRecipient = nil, nil, false
	}
}

// mxSettled is the outcome of an attempt after which no recipient waits.
func mxSettled(o *outcome, t *mxTally, all, skipped []string, legacy bool) {
	o.status, o.detail, o.metric = deriveStatus(t.final, all, skipped), t.lastErr, "sent"
	switch o.status {
	case core.StatusUnknown:
		o.metric = "unknown"
	case core.StatusFailed:
		o.metric = "tempfail"
	case core.StatusBounced:
		o.metric = "permfail"
	case core.StatusDelivered:
		// email.sent once for the send, when it became delivered;
		// each recipient's email.delivered tells the rest.
		o.detail, o.event = "accepted by the last destination; each recipient's delivered tells which", core.EventSent
	case core.StatusSent:
		// Copies a relay or a provider took: each recipient's state
		// says whose.
		o.detail, o.event = "every copy not refused was accepted by the next hop; each recipient's state tells which", core.EventSent
	}
	if legacy && len(t.failed) == 0 && (len(t.delivered) > 0) != (len(t.unknown) > 0) {
		// One fate for every recipient attempted, nothing before: the
		// send's own events, as before destinations existed.
		o.states, o.extra, o.perRecipient = nil, nil, false
		if len(t.delivered) > 0 {
			o.event, o.delivered = core.EventSent, true
			o.detail = "accepted by the recipients' mail exchangers"
			if len(t.tlsNote) > 0 {
				o.detail += " (TLS: " + strings.Join(t.tlsNote, "; ") + ")"
			}
		} else {
			o.event = core.EventUnknown
		}
	}
	if o.status == core.StatusBounced {
		o.event = "" // each recipient's bounced tells it
	}
}

// onlySuppressed reports whether the stored states are only the
// suppression list's (written by any first attempt).
func onlySuppressed(prior map[string]core.RecipientState) bool {
	for _, st := range prior {
		if st.Status != core.StatusSuppressed {
			return false
		}
	}
	return true
}

// deriveStatus is the send's status once no recipient is pending, from
// its recipients' (contract section 4): unknown while one is unknown;
// delivered when one was delivered; bounced when every one bounced;
// failed otherwise.
func deriveStatus(final map[string]core.Status, all, skipped []string) core.Status {
	var any = map[core.Status]bool{}
	n := 0
	for _, a := range all {
		if slices.Contains(skipped, a) {
			continue
		}
		n++
		any[final[a]] = true
	}
	switch {
	case any[core.StatusUnknown]:
		return core.StatusUnknown
	case any[core.StatusDelivered], any[core.StatusComplained]:
		return core.StatusDelivered
	case any[core.StatusSent]:
		// A copy taken by a relay or a provider (copies.go): the next
		// hop has it, as a send's sent says.
		return core.StatusSent
	case n > 0 && len(any) == 1 && any[core.StatusBounced]:
		return core.StatusBounced
	}
	return core.StatusFailed
}

// mxFailure is the outcome of an mx attempt that failed before any
// destination was tried (the lookups' configuration, a recipient without
// a domain, the recipients' states unreadable): the send's own, retried
// until the queue lifetime whatever --max-attempts says.
func (d *Deliverer) mxFailure(s *core.Send, err error) outcome {
	o := outcomeOf(err, s.Tries, math.MaxInt)
	o.attempted = true
	if o.retry {
		now := d.cfg.Now().UTC()
		deadline := dueAt(s).Add(d.cfg.MaxQueueLifetime)
		if !now.Before(deadline) {
			return outcome{status: core.StatusFailed, event: core.EventFailed, reached: o.reached, attempted: true, metric: "tempfail",
				detail: fmt.Sprintf("not delivered within the queue lifetime (%v): %v", d.cfg.MaxQueueLifetime, err)}
		}
		at := now.Add(Backoff(d.cfg.RetryBase, d.cfg.MaxRetryDelay, s.Tries))
		if at.After(deadline) {
			at = deadline
		}
		o.retryAt = &at
	}
	return o
}
