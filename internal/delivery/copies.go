package delivery

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/render"
	"github.com/sendonce/sendonce/internal/transport"
)

// One copy per recipient (docs/deliverability.md, "One-click
// unsubscribe"). A send that carries the one-click unsubscribe headers and
// has several recipients (to, cc and bcc together) goes out as one message
// per recipient: the same header block (the same Message-ID, To and Cc;
// never Bcc), with that recipient's List-Unsubscribe and
// List-Unsubscribe-Post added before the message is signed, to that
// recipient alone. Every road out takes the copies one after the other
// (route: a relay, a provider, the failover chain, the recipient's own
// exchanger under mx, capture).
//
// The exactly-once bookkeeping is mx delivery's (mx.go): each copy is a
// destination of its own, and what a copy's handoff did is written
// (checkpoint) before the next copy is handed over. So a retry, a
// reconcile or a crash never hands a copy that was accepted over again; a
// copy whose handoff broke after its data was sent is unknown and is never
// resent by itself; a copy refused for good bounces its recipient only,
// and a temporary failure retries the copies not yet accepted.

// perCopy reports whether s goes out as one copy per recipient.
func perCopy(s *core.Send) bool {
	return s.NeedsUnsubscribe() && len(app.RecipientsOf(s)) > 1
}

// unsubscribeCopy is raw with the one-click unsubscribe headers of its
// one recipient when the send carries them (docs/deliverability.md,
// "One-click unsubscribe"), before it is signed. A send with several
// recipients goes out as one copy per recipient instead (copies.go).
func (d *Deliverer) unsubscribeCopy(ctx context.Context, s *core.Send, to []string, raw []byte) ([]byte, error) {
	if !s.NeedsUnsubscribe() || len(to) != 1 {
		return raw, nil
	}
	h, err := d.svc.UnsubscribeHeaders(ctx, s, to[0])
	if err != nil {
		return nil, err
	}
	return render.PrependHeaders(raw, h), nil
}

// handOffCopies is handOff for a send that goes out as one copy per
// recipient (perCopy): raw is the rendered message, not yet signed; signer
// the address whose domain's key signs; env.To the recipients not
// suppressed.
func (d *Deliverer) handOffCopies(ctx context.Context, s *core.Send, slot *transport.Slot, env transport.Envelope, raw []byte, signer string) handoff {
	pending, prior, err := d.pendingOf(ctx, s, env.To)
	if err != nil {
		return handoff{err: &transport.Error{Class: transport.Temporary, Stage: "read", Err: err}}
	}
	h := &mxHandoff{prior: prior, copies: true}
	out := handoff{dests: h}
	var (
		inTx, late []func(core.Tx) error
		rest       *copyEnd // set once a failure that is not the copy's own ends the walk
	)
	for _, rcpt := range pending {
		if rest == nil && ctx.Err() != nil {
			rest = &copyEnd{waiting: "the attempt ran out of time"}
		}
		if rest == nil {
			if err := d.checkpoint(ctx, s, h); err != nil {
				if errors.Is(err, errClaimLost) {
					h.lost = true
					break
				}
				rest = &copyEnd{waiting: "checkpoint failed: " + err.Error()}
			}
		}
		if rest != nil {
			h.dests = append(h.dests, rest.of(rcpt))
			continue
		}
		one := transport.Envelope{From: env.FromOf([]string{rcpt}), To: []string{rcpt}}
		sub := d.handOverCopy(ctx, s, slot, one, raw, signer)
		out.mx = out.mx || sub.mx
		out.kind = cmpOr(out.kind, sub.kind)
		switch {
		case sub.inTx != nil && sub.err != nil:
			// Last: a provider that may hold this copy pins the send
			// (providers.go) over what the copies it took recorded.
			late = append(late, sub.inTx)
		case sub.inTx != nil:
			inTx = append(inTx, sub.inTx)
		}
		rest = h.add(rcpt, sub)
	}
	if !out.mx && s.Tries >= d.cfg.MaxAttempts {
		h.exhausted = true
	}
	if inTx = append(inTx, late...); len(inTx) > 0 {
		out.inTx = func(tx core.Tx) error {
			for _, f := range inTx {
				if err := f(tx); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// handOverCopy renders rcpt's copy (its unsubscribe headers, then the
// signature over them) and hands it over on the send's road.
func (d *Deliverer) handOverCopy(ctx context.Context, s *core.Send, slot *transport.Slot, env transport.Envelope, raw []byte, signer string) handoff {
	rcpt := env.To[0]
	hdr, err := d.svc.UnsubscribeHeaders(ctx, s, rcpt)
	if err != nil {
		return handoff{err: &transport.Error{Class: transport.Temporary, Stage: "render", Err: err}}
	}
	copyRaw, signed, err := d.svc.SignDKIM(ctx, s.Tenant, signer, render.PrependHeaders(raw, hdr))
	if err != nil {
		d.logger.WarnContext(ctx, "dkim signing failed", slog.String("send_id", s.ID), slog.Any("error", err))
		return handoff{err: &transport.Error{Class: transport.Temporary, Stage: "sign", Err: err}}
	}
	d.logger.LogAttrs(ctx, slog.LevelDebug, "handing over a copy", slog.String("send_id", s.ID),
		slog.Int("copy", slices.Index(app.RecipientsOf(s), core.NormalizeAddress(rcpt))), slog.Bool("dkim_signed", signed))
	return d.route(ctx, s, slot, env, copyRaw)
}

// copyIndex names rcpt's copy of s for a provider (transport.Submission's
// Copy): its index among the send's recipients, as its token has it; ""
// for a send that goes out as one message.
func copyIndex(s *core.Send, rcpts []string) string {
	if len(rcpts) != 1 || !perCopy(s) {
		return ""
	}
	if i := slices.Index(app.RecipientsOf(s), core.NormalizeAddress(rcpts[0])); i >= 0 {
		return strconv.Itoa(i)
	}
	return ""
}

// copyEnd is the outcome every copy after a failure that was not a
// copy's own gets without being tried: the relay could not be reached or
// refused the session, so the next copy would fare the same.
type copyEnd struct {
	site    string
	err     *transport.Error // nil: waiting
	waiting string
}

func (e *copyEnd) of(rcpt string) *destDone {
	dd := &destDone{d: &transport.Destination{Site: e.site, Rcpts: []string{rcpt}}, accepted: core.StatusSent}
	switch {
	case e.err == nil:
		dd.o.Waiting, dd.o.Why = []string{rcpt}, e.waiting
	case e.err.Class == transport.Permanent:
		dd.failed = []transport.Refusal{{Recipient: rcpt, Err: e.err}}
	default:
		dd.o.Deferred = []transport.Refusal{{Recipient: rcpt, Err: e.err}}
	}
	return dd
}

// add folds in what handing rcpt's copy over did. It returns the outcome
// of the copies after it when the failure was not the copy's own.
func (h *mxHandoff) add(rcpt string, sub handoff) *copyEnd {
	if sub.dests != nil { // the mx road: its destination's own outcome
		h.dests = append(h.dests, sub.dests.dests...)
		h.refused = append(h.refused, sub.dests.refused...)
		h.lost = h.lost || sub.dests.lost
		return nil
	}
	site := "the next hop"
	if sub.kind != "" {
		site = "the " + sub.kind + " transport"
	}
	dd := &destDone{d: &transport.Destination{Site: site, Rcpts: []string{rcpt}}, accepted: core.StatusSent}
	if sub.mx {
		dd.accepted = core.StatusDelivered
	}
	h.dests = append(h.dests, dd)
	err := sub.err
	if err == nil {
		dd.o.Delivered, dd.o.Reached = []string{rcpt}, true
		return nil
	}
	if errors.Is(err, errNoSession) || errors.Is(err, errLargeBusy) {
		dd.o.Waiting, dd.o.Why = []string{rcpt}, err.Error()
		return &copyEnd{site: site, waiting: err.Error()}
	}
	var te *transport.Error
	if !errors.As(err, &te) {
		te = &transport.Error{Class: transport.Temporary, Stage: "handoff", Err: err}
	}
	dd.o.Reached = te.Reached
	r := transport.Refusal{Recipient: rcpt, Err: te}
	switch {
	case te.Class == transport.Ambiguous:
		dd.o.Unknown = []transport.Refusal{r}
	case te.Class == transport.Permanent && copysOwn(te):
		dd.o.Refused = []transport.Refusal{r}
	case te.Class == transport.Permanent:
		dd.failed = []transport.Refusal{r}
	default:
		dd.o.Deferred = []transport.Refusal{r}
	}
	if te.Class == transport.Ambiguous || copysOwn(te) || te.MaybeAccepted {
		return nil
	}
	return &copyEnd{site: site, err: te}
}

// copysOwn reports whether a failure answered the copy itself (its RCPT,
// its data, a provider's refusal of that message) rather than the session
// any copy would have had.
func copysOwn(e *transport.Error) bool {
	switch e.Stage {
	case transport.StageRcpt, transport.StageData, transport.StageDataEnd, transport.StageRequest, transport.StageResponse, "render", "sign":
		return true
	}
	return false
}

// fail records a recipient failed for good: its state and email.failed.
func (t *mxTally) fail(rcpt, why string, b *core.Bounce) {
	a := core.NormalizeAddress(rcpt)
	t.failed = append(t.failed, a)
	t.final[a] = core.StatusFailed
	if t.lastErr == "" {
		t.lastErr = why
	}
	t.states = append(t.states, core.RecipientState{Address: a, Status: core.StatusFailed, Detail: why, UpdatedAt: t.now})
	t.events = append(t.events, core.Event{Type: core.EventFailed, At: t.now, Recipient: a, Detail: why, Bounce: b})
}
