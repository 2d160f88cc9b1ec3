package delivery

import (
	"context"
	"slices"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/transport"
)

// A failover chain's mx link goes the one road out of --transport mx
// (handOverMX): per destination, under MTA-STS, DANE and shaping, each
// recipient's outcome recorded as it lands. The chain goes on past it only
// when nothing was handed over: no recipient delivered, unknown or waiting
// for its destination's shaping, and at least one deferred (the exchangers
// could not be reached, or their TLS did not meet the policy). A refusal
// by the recipients' own servers stands: another transport would be
// refused too.

// mxLink runs the mx link. It returns the handoff that ends the chain, or
// (when the chain may go on) the definite error to note.
func (d *Deliverer) mxLink(ctx context.Context, s *core.Send, env transport.Envelope, raw []byte) (handoff, error) {
	h := d.handOverMX(ctx, s, env, raw)
	if h.dests == nil {
		if h.err != nil && transport.Definite(h.err) {
			return h, h.err
		}
		return h, nil
	}
	if h.dests.lost || len(h.dests.refused) > 0 {
		return h, nil
	}
	var deferred error
	for _, dd := range h.dests.dests {
		o := dd.o
		if len(o.Delivered)+len(o.Unknown)+len(o.Waiting)+len(o.Refused) > 0 {
			return h, nil
		}
		if deferred == nil && len(o.Deferred) > 0 {
			deferred = o.Deferred[0].Err
		}
	}
	if deferred == nil {
		return h, nil // nothing was pending
	}
	return h, deferred
}

// chainEnvelope is the envelope the chain's other links get when it has an
// mx link: the recipients that link has not handed over yet, so a later
// attempt through a provider never sends to one of them again.
func (d *Deliverer) chainEnvelope(ctx context.Context, s *core.Send, links []link, env transport.Envelope) (transport.Envelope, error) {
	if !slices.ContainsFunc(links, func(l link) bool { return l.spec.Kind == transport.Direct }) {
		return env, nil
	}
	pending, _, err := d.pendingOf(ctx, s, env.To)
	if err != nil {
		return env, err
	}
	env.To = pending
	return env, nil
}
