package transport

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-smtp"
)

// Per-destination delivery (the delivery package's way of using the mx
// transport). Plan resolves a message's recipient domains and groups those
// whose exchangers are the same into destinations; Send hands the message
// to one destination in one SMTP transaction, under that destination's
// shaping, and tells each of its recipients' outcome. Unlike Deliver
// (all domains or none, for callers that need one outcome), nothing ties
// one destination's outcome to another's: the caller records each as it
// lands and retries only what is left.

// Refusal is one recipient's own outcome when it is not delivered: a
// refusal for good (Err Permanent: a 5xx to its RCPT or to the end of
// DATA, a domain that takes no mail), a deferral (Temporary) or an
// unknown outcome (Ambiguous).
type Refusal struct {
	Recipient string
	Err       *Error
}

// Destination is the recipients of one message whose domains share their
// mail exchangers.
type Destination struct {
	// Key names the exchangers (their host names, sorted, comma-joined);
	// Site names the shaping state: Key, or the rolled-up rule's name.
	Key, Site string
	// Rule is the shaping rule in force ("default" for none).
	Rule string
	// Stream is the stream of the message Send hands over (the caller's
	// to set): it picks the egress pool ("" is transactional's).
	Stream  string
	Domains []string
	Rcpts   []string
	hosts   []exchanger
	limits  Limits
	// err is a temporary failure of the lookups: nothing is attempted.
	err *Error
	// sts is the strictest MTA-STS policy among the domains.
	sts *stsPolicy
}

// Plan resolves the domains of rcpts and groups them into destinations,
// in order of first appearance. Recipients whose domain takes no mail
// (it does not exist, null MX) are refused for good. A domain whose
// lookup failed for now is a destination of its own carrying the
// failure, which Send reports without a connection.
func (m *MX) Plan(ctx context.Context, rcpts []string) ([]*Destination, []Refusal, error) {
	if strings.ContainsAny(m.cfg.HELOName, "\r\n ") {
		return nil, nil, &Error{Class: Temporary, Stage: StageDial, Err: errors.New("invalid transport configuration: invalid HELO name")}
	}
	groups, err := groupByDomain(rcpts)
	if err != nil {
		return nil, nil, &Error{Class: Permanent, Stage: StageRcpt, Err: err}
	}
	res, err := m.resolver()
	if err != nil {
		return nil, nil, &Error{Class: Temporary, Stage: StageResolve, Err: err}
	}
	var (
		dests   []*Destination
		refused []Refusal
	)
	for _, g := range groups {
		hosts, err := m.exchangers(ctx, res, g.domain)
		if err != nil {
			e := err.(*Error)
			if e.Class == Permanent {
				for _, r := range g.rcpts {
					refused = append(refused, Refusal{Recipient: r, Err: e})
				}
				continue
			}
			dests = append(dests, &Destination{Key: "domain:" + g.domain, Site: "domain:" + g.domain, Domains: []string{g.domain}, Rcpts: g.rcpts, err: e})
			continue
		}
		policy := m.sts.policy(ctx, res, g.domain)
		if policy != nil && policy.Mode == STSEnforce {
			hosts = slices.DeleteFunc(slices.Clone(hosts), func(h exchanger) bool { return !policy.matches(h.host) })
			if len(hosts) == 0 {
				e := &Error{Class: Temporary, Stage: StageResolve, Err: fmt.Errorf("%s: no mail exchanger matches its MTA-STS policy (mode enforce, mx %s)", g.domain, strings.Join(policy.MX, " "))}
				dests = append(dests, &Destination{Key: "domain:" + g.domain, Site: "domain:" + g.domain, Domains: []string{g.domain}, Rcpts: g.rcpts, err: e})
				continue
			}
		}
		names := make([]string, len(hosts))
		for i, h := range hosts {
			names[i] = h.host
		}
		key := strings.Join(slices.Sorted(slices.Values(names)), ",")
		if i := slices.IndexFunc(dests, func(d *Destination) bool { return d.Key == key && d.err == nil }); i >= 0 {
			d := dests[i]
			d.Domains = append(d.Domains, g.domain)
			d.Rcpts = append(d.Rcpts, g.rcpts...)
			d.sts = stricter(d.sts, policy)
			continue
		}
		limits, rule, rollup := m.shaping.limitsFor([]string{g.domain}, hosts[0].host)
		site := key
		if rollup != "" {
			site = rollup
		}
		dests = append(dests, &Destination{Key: key, Site: site, Rule: rule, Domains: []string{g.domain}, Rcpts: g.rcpts,
			hosts: hosts, limits: limits, sts: policy})
	}
	return dests, refused, nil
}

// DestOutcome is what Send did for each recipient of a destination: each
// is in exactly one of Delivered, Refused, Deferred, Unknown and Waiting.
type DestOutcome struct {
	// Delivered got a 2xx to the end of DATA.
	Delivered []string
	// Refused were refused for good (5xx): Err is Permanent.
	Refused []Refusal
	// Deferred failed for now (4xx, no connection, TLS policy): Err is
	// Temporary; retry them.
	Deferred []Refusal
	// Unknown were in a transaction that broke after DATA began: Err is
	// Ambiguous; never retry them by themselves.
	Unknown []Refusal
	// Waiting were not attempted: the destination's shaping said wait
	// (Why) until RetryAt.
	Waiting []string
	Why     string
	// RetryAt, when not zero, is when the destination takes mail again:
	// for Waiting, and for Deferred after a slow-down reply.
	RetryAt time.Time
	// SlowDown is the action of the slow-down rule a reply matched ("" for
	// none), and Reply that reply.
	SlowDown, Reply string
	// Resumed: this delivery brought the destination back to its full
	// limits after a slow-down.
	Resumed bool
	// Reached: a server greeted.
	Reached bool
	// TLS says how the session was protected ("" when none was opened).
	TLS string
}

// Attempted reports whether anything was tried (not only Waiting).
func (o *DestOutcome) Attempted() bool {
	return len(o.Delivered)+len(o.Refused)+len(o.Deferred)+len(o.Unknown) > 0
}

// Send hands raw to one destination in one SMTP transaction.
func (m *MX) Send(ctx context.Context, d *Destination, from string, raw []byte) DestOutcome {
	var out DestOutcome
	all := func(class Class, e *Error) {
		list := &out.Deferred
		if class == Ambiguous {
			list = &out.Unknown
		} else if class == Permanent {
			list = &out.Refused
		}
		for _, r := range d.Rcpts {
			*list = append(*list, Refusal{Recipient: r, Err: e})
		}
	}
	if d.err != nil {
		all(d.err.Class, d.err)
		return out
	}
	if stage, err := checkEnvelope(Envelope{From: from, To: d.Rcpts}); err != nil {
		all(Permanent, &Error{Class: Permanent, Stage: stage, Err: err})
		return out
	}
	needVerified := d.sts != nil && d.sts.Mode == STSEnforce || m.cfg.VerifyTLS || d.limits.TLS == TLSModeVerify
	st := m.shaper.site(d.Site, d.limits, d.Rule)
	start := time.Now()
	p, l, err := m.sessionFor(ctx, st, d, needVerified, &out)
	if l == nil {
		return out // waiting
	}
	if err != nil {
		out.Reached = err.Reached
		m.slowed(st, &out, err) // before the connection is given back: it counts as one of those open
		l.done(nil, false, 0)
		all(err.Class, err)
		return out
	}
	out.Reached, out.TLS = true, p.tlsState()
	if d.sts != nil && d.sts.Mode == STSTesting && !p.verified {
		out.TLS += fmt.Sprintf("; MTA-STS testing: the policy would have refused this session (%s)", p.tlsWhy)
	}
	keep, ok := m.transaction(ctx, p, d, from, raw, &out)
	if keep {
		p.msgs++
		out.Resumed = l.done(p, ok, time.Since(start))
	} else {
		p.close()
		out.Resumed = l.done(nil, ok, time.Since(start))
	}
	for _, r := range slices.Concat(out.Deferred, out.Unknown) {
		if out.SlowDown == "" {
			m.slowed(st, &out, r.Err)
		}
	}
	return out
}

// slowed applies the slow-down rule a failure's reply matches.
func (m *MX) slowed(st *site, out *DestOutcome, e *Error) {
	var se *smtp.SMTPError
	if !errors.As(e, &se) {
		return
	}
	r := m.shaping.slowDown(se.Code, se.Message)
	if r == nil {
		return
	}
	reply := fmt.Sprintf("%d %s", se.Code, se.Message)
	out.SlowDown, out.Reply = r.Action, reply
	out.RetryAt = st.slowDown(r, reply)
}

// transaction sends one message on p: MAIL, RCPT (each recipient's own
// refusal or deferral kept), DATA. keep reports that the session is fit
// for the next message; ok that nothing went wrong with the server.
func (m *MX) transaction(ctx context.Context, p *pooled, d *Destination, from string, raw []byte, out *DestOutcome) (keep, ok bool) {
	a := &attempt{cfg: p.cfg, stage: StageMail, reached: true, client: p.c(), perRecipient: true, deferRcpt: true}
	stop := context.AfterFunc(ctx, func() { p.ss.raw.Close() })
	defer stop()
	wrap := func(err error) *Error {
		e := err.(*Error)
		e.Err = fmt.Errorf("mail exchanger %s [%s]: %w", p.host, p.ip, e.Err)
		return e
	}
	if err := a.envelope(ctx, p.ss, Envelope{From: from, To: d.Rcpts}, len(raw)); err != nil {
		e := wrap(err)
		for _, r := range d.Rcpts {
			if e.Class == Permanent {
				out.Refused = append(out.Refused, Refusal{Recipient: r, Err: e})
			} else {
				out.Deferred = append(out.Deferred, Refusal{Recipient: r, Err: e})
			}
		}
		return false, false
	}
	for _, r := range a.refused {
		out.Refused = append(out.Refused, Refusal{Recipient: r.Recipient, Err: wrap(r.Err)})
	}
	for _, r := range a.deferred {
		out.Deferred = append(out.Deferred, Refusal{Recipient: r.Recipient, Err: wrap(r.Err)})
	}
	if len(a.accepted) == 0 {
		// Nobody to send to: RSET discards the transaction, the session
		// stays fit.
		p.c().CommandTimeout = min(m.cfg.CommandTimeout, quitTimeout)
		return p.c().Reset() == nil && ctx.Err() == nil, len(a.deferred) == 0
	}
	if err := a.data(ctx, p.ss, raw); err != nil {
		e := wrap(err)
		for _, r := range a.accepted {
			switch e.Class {
			case Permanent:
				out.Refused = append(out.Refused, Refusal{Recipient: r, Err: e})
			case Ambiguous:
				out.Unknown = append(out.Unknown, Refusal{Recipient: r, Err: e})
			default:
				out.Deferred = append(out.Deferred, Refusal{Recipient: r, Err: e})
			}
		}
		return false, false // closed: a failed transaction is never followed on its session
	}
	out.Delivered = append(out.Delivered, a.accepted...)
	if err := p.ss.nc.SetDeadline(time.Time{}); err != nil {
		return false, true
	}
	return ctx.Err() == nil, len(a.deferred) == 0
}

// connect opens a session to one of d's exchangers, trying them in
// preference order, from src (nil: the system's choice). ready, when not
// nil, takes each new session further (Deliver's envelope): a temporary
// failure there closes it and moves on to the next address, like a failed
// connection; any other failure ends the walk.
func (m *MX) connect(ctx context.Context, d *Destination, needVerified bool, src *Source, ready func(*pooled) error) (*pooled, *Error) {
	var (
		tried, skipped int
		lookupErr      error
		last           *Error
		anyTemporary   bool
	)
	res, err := m.resolver()
	if err != nil {
		return nil, &Error{Class: Temporary, Stage: StageResolve, Err: err}
	}
	for _, h := range d.hosts {
		if tried >= m.cfg.MaxAddresses {
			break
		}
		dp, err := m.daneFor(ctx, res, h)
		if err != nil {
			lookupErr, anyTemporary = err, true // not this exchanger, for now: never without its TLSA
			continue
		}
		addrs, err := res.addresses(ctx, h.host)
		if err != nil {
			lookupErr, anyTemporary = err, true
			continue
		}
		for _, ip := range addrs {
			if !m.usable(ip) {
				skipped++
				continue
			}
			if tried >= m.cfg.MaxAddresses {
				break
			}
			tried++
			p, err := m.dialSession(ctx, h.host, ip, needVerified, d.limits.TLS == TLSModeRequired, dp, src)
			if err == nil && ready != nil {
				if err = ready(p); err != nil {
					p.close()
					if e := err.(*Error); e.Class != Temporary {
						e.Err = fmt.Errorf("mail exchanger %s [%s]: %w", h.host, ip, e.Err)
						return nil, e
					}
				}
			}
			if err == nil {
				return p, nil
			}
			e := err.(*Error)
			e.Err = fmt.Errorf("mail exchanger %s [%s]: %w", h.host, ip, e.Err)
			// A connection is never a message: even a 5xx greeting or
			// EHLO says nothing about the recipients, so the next
			// exchanger is tried and the outcome stays temporary.
			anyTemporary = anyTemporary || e.Class == Temporary || e.Stage == StageGreeting || e.Stage == StageEHLO
			if last == nil || e.Reached || !last.Reached {
				last = e
			}
		}
	}
	domain := strings.Join(d.Domains, ", ")
	switch {
	case last != nil:
		out := *last
		if anyTemporary {
			out.Class = Temporary
		}
		out.Err = fmt.Errorf("%s: all %d mail exchanger addresses tried failed; the most telling: %w", domain, tried, last.Err)
		return nil, &out
	case lookupErr != nil:
		return nil, &Error{Class: Temporary, Stage: StageResolve, Err: fmt.Errorf("%s: looking up its mail exchangers: %w", domain, lookupErr)}
	case skipped > 0:
		return nil, &Error{Class: Permanent, Stage: StageResolve, Err: fmt.Errorf("%s: its mail exchangers have only addresses the outbound policy refuses (loopback, private, reserved; see --outbound-allow)", domain)}
	}
	return nil, &Error{Class: Permanent, Stage: StageResolve, Err: fmt.Errorf("%s: no mail exchanger has an address", domain)}
}

// Sites reports every destination's shaping state in this process.
func (m *MX) Sites() []SiteStatus { return m.shaper.status() }

// Close ends the idle sessions kept for the next message.
func (m *MX) Close() error {
	m.shaper.close()
	return nil
}
