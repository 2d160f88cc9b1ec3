package delivery

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/transport"
)

// The pipelined claim. A claim commits its sends as sending before any of
// them is handed over, so that a crash leaves them unknown, never resent;
// each relay session used to wait for that commit before it said a word.
// Now, as soon as ClaimDue has returned the sends — inside the claim's
// transaction, before its commit (SQLite's group commit commits the batch
// after the function returned) — each send's envelope is said on its
// slot's session (transport.Slot.Prepare: RSET when the session was used,
// MAIL, RCPT) while the commit runs. The data is not: DATA comes from the
// handoff, which runs only once the commit succeeded. When the commit
// fails, the claim releases the slots, which discards the transactions
// (RSET). The handoff computes the envelope again (envelopeOf, the one
// computation); when it differs from the prepared one (a recipient
// suppressed in between), the session discards that transaction and the
// message goes out in a whole new one.
//
// Only sends on the simple road are prepared, where the claim's slot is
// certainly the handoff's session: the default transport is a relay
// without fallbacks, the send's mailbox names no relay of its own, and it
// goes out as one message (not one copy per recipient). Large ones are
// left out too: a prepared MAIL carries no SIZE, which a relay may check
// before it takes megabytes.

// pipeline prepares the envelopes of one claim's sends on their slots.
type pipeline struct {
	d      *Deliverer
	ctx    context.Context // the preparations' budget: an attempt's
	cancel context.CancelFunc
	slots  []*slotPrep

	mu      sync.Mutex // guards the fields below and the slotPreps'
	running int        // slotPreps whose loop runs
	sealed  bool       // the claim's transaction is over: no send comes
}

// slotPrep is the preparation on one slot. The claim's transaction may
// run more than once (the group commit runs a batch again after another
// transaction of it failed, or after a deadlock): the send of its latest
// run is the one prepared, one preparation at a time.
type slotPrep struct {
	p       *pipeline
	slot    *transport.Slot
	want    *core.Send    // the latest run's send on the slot; nil: none
	fresh   bool          // want was set since the loop last read it
	running bool          // loop runs
	done    chan struct{} // closed once sealed and no preparation runs
}

// newPipeline returns the pipeline of a claim that took slots of the
// default relay; nil (which prepares nothing) when that relay is not the
// whole road (fallbacks).
func (d *Deliverer) newPipeline(ctx context.Context, slots []*transport.Slot) *pipeline {
	if len(slots) == 0 || d.defaultKind != transport.Relay || len(d.cfg.Fallbacks) > 0 {
		return nil
	}
	p := &pipeline{d: d}
	// No preparation outlives the budget of the attempt it is for.
	p.ctx, p.cancel = context.WithTimeout(ctx, attemptBudget(d.cfg.AttemptLease))
	for _, sl := range slots {
		p.slots = append(p.slots, &slotPrep{p: p, slot: sl, done: make(chan struct{})})
	}
	return p
}

// start prepares sends[i] on slot i, replacing what an earlier run of the
// transaction asked for. It does not wait: it runs inside the claim's
// transaction.
func (p *pipeline) start(sends []*core.Send) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, sp := range p.slots {
		sp.want, sp.fresh = nil, true
		if i < len(sends) {
			sp.want = sends[i]
		}
		if sp.want != nil && !sp.running {
			sp.running = true
			p.running++
			go sp.loop()
		}
	}
}

// loop prepares the latest send asked for until none is new.
func (sp *slotPrep) loop() {
	p := sp.p
	for {
		p.mu.Lock()
		if !sp.fresh {
			sp.running = false
			p.running--
			if p.sealed {
				close(sp.done)
				if p.running == 0 {
					p.cancel()
				}
			}
			p.mu.Unlock()
			return
		}
		s := sp.want
		sp.fresh = false
		p.mu.Unlock()
		if s != nil {
			p.d.prepare(p.ctx, sp.slot, s)
		}
	}
}

// seal says the claim's transaction is over: the preparations under way
// are the last.
func (p *pipeline) seal() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sealed = true
	for _, sp := range p.slots {
		if !sp.running {
			close(sp.done)
		}
	}
	if p.running == 0 {
		p.cancel()
	}
}

// wait waits for every preparation of the claim (after seal).
func (p *pipeline) wait() {
	if p == nil {
		return
	}
	for _, sp := range p.slots {
		sp.wait()
	}
}

// at is slot i's preparation; nil without a pipeline.
func (p *pipeline) at(i int) *slotPrep {
	if p == nil {
		return nil
	}
	return p.slots[i]
}

// wait waits for the slot's preparation to be over (after seal): the
// handoff then finds the envelope said, or nothing under way.
func (sp *slotPrep) wait() {
	if sp != nil {
		<-sp.done
	}
}

// prepare says s's envelope on slot when s takes the simple road, as the
// handoff will compute it: render.Envelope without the suppressed
// recipients (the same check), with the same bounce address. A send that
// would not be handed over (every recipient suppressed, a broken address)
// is left alone.
func (d *Deliverer) prepare(ctx context.Context, slot *transport.Slot, s *core.Send) {
	if isLarge(s) || perCopy(s) {
		return
	}
	mb, err := d.svc.Mailbox(ctx, s.Tenant, s.MailboxID)
	if (err != nil && !errors.Is(err, core.ErrNotFound)) || (mb != nil && mb.Transport != "") {
		return
	}
	skipped, all, err := d.suppressed(ctx, s)
	if err != nil || len(skipped) == len(all) {
		return
	}
	rendered, err := render.Envelope(s)
	if err != nil {
		return
	}
	if err := slot.Prepare(ctx, d.envelopeOf(s, rendered, skipped)); err != nil {
		// The handoff starts over (or returns the relay's refusal).
		d.logger.LogAttrs(ctx, slog.LevelDebug, "envelope not said ahead", slog.String("send_id", s.ID), slog.Any("error", err))
	}
}
