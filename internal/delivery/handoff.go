package delivery

import (
	"context"
	"slices"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/transport"
)

// handOff gives the message to its transport. At most DefaultLargeAttempts
// large messages are handed over at once; past it the attempt is deferred
// (errLargeBusy) before anything was begun. The capture transport keeps
// it in the database: its handoff is a write that joins the outcome's
// transaction (inTx), so the message is kept exactly when the send is
// recorded sent.
//
// A relay's message goes out on the slot taken before the claim when it is
// one of that relay's; otherwise on a slot taken now, without waiting: a
// send must not wait for a session while it is recorded sending, so with
// none free it is deferred (errNoSession) before anything was begun.
//
// Suppressed recipients (skip) are left out of the envelope, not out of
// the headers; with --bounce-domain the envelope sender is the send's VERP
// address. mx reports that the mx transport took it.
func (d *Deliverer) handOff(ctx context.Context, s *core.Send, slot *transport.Slot, skip []string) handoff {
	if isLarge(s) {
		select {
		case d.large <- struct{}{}:
			defer func() { <-d.large }()
		default:
			return handoff{err: errLargeBusy}
		}
	}
	if s.AttachmentCount > 0 && s.Attachments == nil {
		// The files are read only for the attempt: the claim and every list
		// read the row without them.
		atts, err := d.store.SendAttachments(ctx, s.ID)
		if err != nil {
			return handoff{err: &transport.Error{Class: transport.Temporary, Stage: "render", Err: err}}
		}
		s.Attachments = atts
	}
	raw, rendered, err := render.Message(s)
	if err != nil {
		return handoff{err: &transport.Error{Class: transport.Permanent, Stage: "render", Err: err}}
	}
	signer := rendered.From // the From header's address: its domain's key signs
	env := d.envelopeOf(s, rendered, skip)
	if perCopy(s) {
		return d.handOffCopies(ctx, s, slot, env, raw, signer)
	}
	if raw, err = d.unsubscribeCopy(ctx, s, env.To, raw); err != nil {
		return handoff{err: &transport.Error{Class: transport.Temporary, Stage: "render", Err: err}}
	}
	return d.handOver(ctx, s, slot, env, raw, signer)
}

// envelopeOf is the envelope an attempt of s hands over, from the send's
// rendered one (render.Envelope): without the suppressed recipients
// (skip), and with --bounce-domain from the send's VERP address. The
// claim's pipelining (pipeline.go) says it to the relay ahead of the
// message; whatever differs at the handoff starts the transaction over.
func (d *Deliverer) envelopeOf(s *core.Send, rendered transport.Envelope, skip []string) transport.Envelope {
	env := transport.Envelope{From: rendered.From}
	env.To = slices.DeleteFunc(slices.Clone(rendered.To), func(r string) bool { return slices.Contains(skip, core.NormalizeAddress(r)) })
	if d.cfg.Bounce != nil {
		env.From, env.FromFor = bounceAddresses(d.cfg.Bounce, s, env.To)
	}
	return env
}
