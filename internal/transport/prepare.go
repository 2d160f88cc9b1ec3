package transport

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// A claim's pipelining (docs/design.md, "Delivering a send"). Delivery
// commits an attempt as sending before its message is handed over, so
// that a crash leaves it unknown, never resent. The envelope may go ahead
// of that commit: MAIL and RCPT open a transaction that RSET (or QUIT, or
// a lost connection) discards without a trace. The data may not: DATA is
// said only by Send, which delivery calls once the commit succeeded.

// prepared is what Prepare left on a slot for env: a session holding the
// open transaction (MAIL and every RCPT taken), or what kept it from
// opening one (err), which Send returns for env.
type prepared struct {
	env Envelope
	ss  *session
	err error
}

// errReleased is Prepare's answer on a slot already given back.
var errReleased = errors.New("the session slot was released")

// Prepare says env's envelope on the slot's session ahead of its data: on
// a pooled session (after RSET) or a new one, MAIL and RCPT, and keeps the
// transaction open. A Send (or Deliver) of the same envelope then goes
// straight to DATA; one of another envelope discards the transaction
// (RSET) and runs a whole one. What kept Prepare from opening the
// transaction (no session to be had, the relay's refusal of MAIL or of a
// RCPT, a connection lost) is kept instead: Send of that envelope returns
// it, the error the whole transaction would have had, without trying
// again, so an attempt still makes one try. Only a Prepare cut short by
// its ctx leaves Send to start over. Release discards what Send did not
// use.
//
// The prepared MAIL carries no SIZE, since the signed message it would
// announce is not made yet: a relay that limits sizes refuses an
// oversized message at the end of DATA instead. Preparing the envelope
// already prepared does nothing. ctx bounds the preparation only: once
// Prepare returned, the session waits for Send unwatched.
func (sl *Slot) Prepare(ctx context.Context, env Envelope) error {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.released {
		return errReleased
	}
	if p := sl.prep; p != nil && sameEnvelope(p.env, env) {
		return p.err
	}
	if err := sl.s.precheck(env); err != nil {
		return err // Send refuses it before any session: nothing to say
	}
	var held *session
	if p := sl.prep; p != nil {
		sl.prep, held = nil, p.ss
	}
	ss, a, stop, err := sl.s.open(ctx, held)
	if err == nil {
		err = a.envelope(ctx, ss, env, 0)
		if !stop() && err == nil {
			err = fmt.Errorf("preparing the envelope: %w", context.Cause(ctx))
		}
		if err != nil {
			ss.raw.Close()
		}
	}
	switch {
	case err == nil:
		sl.prep = &prepared{env: env, ss: ss}
	case ctx.Err() == nil:
		sl.prep = &prepared{env: env, err: err}
	}
	return err
}

// Send sends one message as Deliver does, on the slot, and keeps the slot
// for the next: a send that goes out as one copy per recipient hands its
// copies over one after the other on the session it was claimed with. The
// caller releases it. When Prepare said env already, only the data is
// sent.
func (sl *Slot) Send(ctx context.Context, env Envelope, raw []byte) error {
	if err := sl.s.precheck(env); err != nil {
		return err
	}
	sl.mu.Lock()
	p := sl.prep
	sl.prep = nil
	sl.mu.Unlock()
	switch {
	case p == nil:
		return sl.s.deliver(ctx, nil, env, raw)
	case !sameEnvelope(p.env, env):
		// Not the envelope said (a recipient suppressed since, say): the
		// session's transaction is discarded and this one runs whole.
		return sl.s.deliver(ctx, p.ss, env, raw)
	case p.err != nil:
		return p.err
	}
	return sl.s.sendData(ctx, p.ss, env, raw)
}

// sendData sends raw in the transaction Prepare opened on ss. A session
// found dead at DATA, before its 354, costs nothing but a new one, as one
// found dead at RSET does: no byte of the message was sent on it.
func (s *SMTP) sendData(ctx context.Context, ss *session, env Envelope, raw []byte) error {
	a := &attempt{cfg: &s.cfg, stage: StageData, reached: true, client: ss.c}
	stop := context.AfterFunc(ctx, func() { ss.raw.Close() })
	ss.c.CommandTimeout, ss.c.SubmissionTimeout = s.cfg.CommandTimeout, s.cfg.DataTimeout
	err := a.data(ctx, ss, raw)
	var te *Error
	if err != nil && !a.dataStarted && ctx.Err() == nil && errors.As(err, &te) && te.Code == 0 {
		stop()
		ss.raw.Close()
		return s.deliver(ctx, nil, env, raw)
	}
	return s.finish(ss, stop, err)
}

// Release gives the slot back. It is safe to call more than once, and
// after Deliver. A transaction Prepare opened and Send did not use is
// discarded first (RSET) and its session pooled; a Prepare under way is
// waited for, and one called later does nothing.
func (sl *Slot) Release() {
	sl.once.Do(func() {
		sl.mu.Lock()
		p := sl.prep
		sl.prep, sl.released = nil, true
		sl.mu.Unlock()
		if p != nil && p.ss != nil {
			sl.s.discard(p.ss)
		}
		if sl.s.sem != nil {
			<-sl.s.sem
		}
	})
}

// discard ends the transaction ss holds with RSET and pools the session;
// one that does not answer in time is closed (which discards it too).
func (s *SMTP) discard(ss *session) {
	ss.c.CommandTimeout = min(s.cfg.CommandTimeout, quitTimeout)
	if err := ss.c.Reset(); err != nil {
		ss.raw.Close()
		return
	}
	s.put(ss)
}

// sameEnvelope reports whether a and b make the same relay transaction:
// one sender and the recipients in order (FromFor is for transports that
// split recipients into transactions; a relay's has them all).
func sameEnvelope(a, b Envelope) bool {
	return a.From == b.From && slices.Equal(a.To, b.To)
}
