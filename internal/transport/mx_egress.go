package transport

import (
	"context"
	"fmt"
	"time"
)

// sessionFor takes a session for one message to d under st's shaping,
// from a source of the message's stream with warm-up room for d today: a
// kept session whose source fits, else a new connection from the source
// whose turn it is. A nil lease means the message waits (out says why
// and until when), nothing begun; with a lease, err is a failure to
// connect (the lease still to be given back).
func (m *MX) sessionFor(ctx context.Context, st *site, d *Destination, needVerified bool, out *DestOutcome) (*pooled, *lease, *Error) {
	fits := func(p *pooled) bool { return (!needVerified || p.verified) && m.egress.fits(p.src, d.Stream) }
	l, retryAt, why := st.acquire(fits)
	if l == nil {
		out.Waiting, out.RetryAt, out.Why = d.Rcpts, retryAt, fmt.Sprintf("destination %s: %s", d.Site, why)
		return nil, nil, nil
	}
	p := l.session
	var src *Source
	if p != nil {
		src = p.src
		if src != nil && !m.egress.warm.take(src.Name, d.Site) {
			// Its source is at today's warm-up cap here: another
			// source of the pool may have room.
			p.quit()
			p, src = nil, nil
		}
	}
	if p != nil {
		p.c().CommandTimeout = m.cfg.CommandTimeout
		if err := p.c().Reset(); err != nil {
			p.close() // dead or confused: no message was started on it
			p = nil   // src stays: its warm-up allowance is taken
		}
	}
	if p != nil {
		return p, l, nil
	}
	if src == nil {
		var ok bool
		var until time.Time
		if src, ok, until = m.egress.pick(d.Stream, d.Site); !ok {
			l.done(nil, false, 0)
			out.Waiting, out.RetryAt = d.Rcpts, until
			out.Why = fmt.Sprintf("destination %s: every egress source of the %s mail is at its warm-up cap for today", d.Site, streamName(d.Stream))
			return nil, nil, nil
		}
	}
	p, err := m.connect(ctx, d, needVerified, src, nil)
	return p, l, err
}

func streamName(s string) string {
	if s == "" {
		return "transactional"
	}
	return s
}
