package transport

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
	"golang.org/x/net/idna"
)

// StageResolve is the DNS lookup of a recipient domain's mail exchangers
// and their addresses (mx transport only).
const StageResolve = "resolve"

// MX delivers each message directly to the mail exchangers of its
// recipients' domains. It is safe for concurrent use.
//
// There is one road out: Plan resolves the recipients' domains into
// destinations under their MTA-STS policies, and connect opens a session
// to a destination's exchangers under DANE and the TLS policy, from an
// egress source (mx_dest.go). Send (per destination, shaped, pooled) is
// how the delivery package uses it; Deliver, below, is the same road for
// a caller that needs one outcome for the whole message.
//
// # Multiple recipient domains (Deliver)
//
// A message to several domains is delivered all-or-nothing as far as SMTP
// allows, in two phases. First, for every destination in the order of
// first appearance, a session is opened and taken up to the accepted
// RCPTs; any failure in this phase ends every open session with QUIT
// before DATA, so nothing was delivered and the error keeps its class
// (Temporary: retry the whole message; Permanent: do not). Then the
// message is sent (DATA) to each prepared session in turn. A failure while
// sending to the first destination has its usual class. A failure after at
// least one accepted the message is Ambiguous, whatever the server said,
// with a *PartialDeliveryError listing the recipients that got it: a retry
// would send it to them again. More than MaxDomains domains is a Permanent
// error: use a relay for such sends.
//
// # One domain
//
// The mail exchangers are looked up with MX records (RFC 5321 section 5.1;
// without MX, the domain's own A/AAAA records are the implicit exchanger;
// a null MX, RFC 7505, is Permanent). They are tried in preference order,
// IPv4 addresses before IPv6, at most MaxAddresses connections. A failure
// before the transaction (no connection, a 4xx or 5xx greeting or EHLO, a
// TLS failure) moves on to the next address: a server refusing all
// sessions says nothing about the message. A refusal of the envelope ends
// the attempt. Once DATA was accepted, no other exchanger is ever tried: a
// 4xx or 5xx to the end of data keeps its class, a broken connection is
// Ambiguous.
type MX struct {
	cfg     MXConfig
	shaping *Shaping
	shaper  *shaper
	sts     *stsCache
	dns     *dnsCache
	egress  *egress // the source of each new connection
}

var _ Transport = (*MX)(nil)

// NewMX returns an mx transport.
func NewMX(cfg MXConfig) *MX {
	m := &MX{cfg: cfg.withDefaults()}
	m.shaping = m.cfg.Shaping
	if m.shaping == nil {
		m.shaping = DefaultShaping()
	}
	m.shaper = newShaper(m.shaping)
	m.sts = newSTSCache(m.cfg)
	m.dns = newDNSCache()
	m.egress = newEgress(m.cfg)
	return m
}

// PartialDeliveryError is the Err of an Ambiguous *Error when the message
// was accepted for some recipient domains and then failed for another.
type PartialDeliveryError struct {
	// Delivered are the recipients whose exchangers accepted the message.
	Delivered []string
	// Undelivered are the others: the failed domain's and those after it.
	Undelivered []string
	// Err is the failure, an *Error.
	Err error
}

func (e *PartialDeliveryError) Error() string {
	return fmt.Sprintf("delivered to %s but not to %s: %v", strings.Join(e.Delivered, ", "), strings.Join(e.Undelivered, ", "), e.Err)
}

func (e *PartialDeliveryError) Unwrap() error { return e.Err }

// Deliver sends one message; see the type's documentation for how
// recipients, exchangers and failures are handled. It returns nil only when
// every recipient domain's exchanger answered 2xx to the end of DATA.
func (m *MX) Deliver(ctx context.Context, env Envelope, raw []byte) error {
	if stage, err := checkEnvelope(env); err != nil {
		return &Error{Class: Permanent, Stage: stage, Err: err}
	}
	groups, err := groupByDomain(env.To)
	if err != nil {
		return &Error{Class: Permanent, Stage: StageRcpt, Err: err}
	}
	if len(groups) > m.cfg.MaxDomains {
		return &Error{Class: Permanent, Stage: StageRcpt, Err: fmt.Errorf("the recipients are in %d domains; the mx transport delivers one message to at most %d (send through a relay instead)", len(groups), m.cfg.MaxDomains)}
	}
	dests, refused, err := m.Plan(ctx, env.To)
	if err != nil {
		return err
	}
	if len(refused) > 0 {
		return refused[0].Err
	}
	var sessions []*mxSession
	defer func() {
		for _, s := range sessions {
			s.abort(ctx)
		}
	}()
	for _, d := range dests {
		s, err := m.prepare(ctx, d, env.FromOf(d.Rcpts), len(raw))
		if err != nil {
			return err
		}
		sessions = append(sessions, s)
	}
	var delivered []string
	for i, s := range sessions {
		if err := s.commit(ctx, raw); err != nil {
			if len(delivered) == 0 {
				return err
			}
			var undelivered []string
			for _, later := range sessions[i:] {
				undelivered = append(undelivered, later.rcpts...)
			}
			te := err.(*Error)
			return &Error{Class: Ambiguous, Stage: te.Stage, Reached: true, Code: te.Code,
				Err: &PartialDeliveryError{Delivered: delivered, Undelivered: undelivered, Err: err}}
		}
		delivered = append(delivered, s.rcpts...)
	}
	return nil
}

// prepare opens a session to one of d's exchangers by connect (the road
// Send takes, unshaped and unpooled) and takes it up to the accepted
// RCPTs: a refusal of any recipient fails the whole.
func (m *MX) prepare(ctx context.Context, d *Destination, from string, size int) (*mxSession, error) {
	if d.err != nil {
		return nil, d.err
	}
	src, ok, _ := m.egress.pick(d.Stream, d.Site)
	if !ok {
		return nil, &Error{Class: Temporary, Stage: StageDial, Err: fmt.Errorf("destination %s: every egress source is at its warm-up cap for today", d.Site)}
	}
	needVerified := d.sts != nil && d.sts.Mode == STSEnforce || m.cfg.VerifyTLS || d.limits.TLS == TLSModeVerify
	var a *attempt
	p, err := m.connect(ctx, d, needVerified, src, func(p *pooled) error {
		a = &attempt{cfg: p.cfg, stage: StageMail, reached: true, client: p.c()}
		stop := context.AfterFunc(ctx, func() { p.ss.raw.Close() })
		defer stop()
		return a.envelope(ctx, p.ss, Envelope{From: from, To: d.Rcpts}, size)
	})
	if err != nil {
		return nil, err
	}
	return &mxSession{a: a, host: p.host, ip: p.ip, rcpts: d.Rcpts, ss: p.ss,
		stop: context.AfterFunc(ctx, func() { p.ss.raw.Close() })}, nil
}

// rcptGroup is the recipients of one domain.
type rcptGroup struct {
	domain string // A-label, lower case
	rcpts  []string
}

// groupByDomain groups recipients by domain, in order of first appearance.
func groupByDomain(rcpts []string) ([]rcptGroup, error) {
	var groups []rcptGroup
	index := map[string]int{}
	for _, r := range rcpts {
		at := strings.LastIndexByte(r, '@')
		if at <= 0 || at == len(r)-1 {
			return nil, fmt.Errorf("recipient %q has no domain", r)
		}
		d := strings.TrimSuffix(r[at+1:], ".")
		if strings.HasPrefix(d, "[") {
			return nil, fmt.Errorf("recipient %q: address literals are not supported by the mx transport", r)
		}
		a, err := idna.Lookup.ToASCII(d)
		if err != nil || !strings.Contains(a, ".") {
			return nil, fmt.Errorf("recipient %q: invalid domain", r)
		}
		a = strings.ToLower(a)
		i, ok := index[a]
		if !ok {
			i = len(groups)
			index[a] = i
			groups = append(groups, rcptGroup{domain: a})
		}
		groups[i].rcpts = append(groups[i].rcpts, r)
	}
	return groups, nil
}

// exchanger is one mail exchanger of a domain.
type exchanger struct {
	host string // without final dot
	pref uint16
	// secure: the MX answer that named it was DNSSEC-validated, so its
	// TLSA records may be used (DANE, RFC 7672 section 2.2.1).
	secure bool
}

// exchangers returns the mail exchangers of domain in preference order.
func (m *MX) exchangers(ctx context.Context, res *mxResolver, domain string) ([]exchanger, error) {
	a, err := res.resolve(ctx, domain, dns.TypeMX)
	if err != nil {
		return nil, &Error{Class: Temporary, Stage: StageResolve, Err: fmt.Errorf("%s: looking up MX: %w", domain, err)}
	}
	rrs, nx := a.Records, a.NXDomain
	if nx {
		return nil, &Error{Class: Permanent, Stage: StageResolve, Err: fmt.Errorf("domain %s does not exist (NXDOMAIN)", domain)}
	}
	var hosts []exchanger
	null := false
	for _, rr := range rrs {
		mx := rr.(*dns.MX)
		if mx.Mx == "." {
			null = true
			continue
		}
		hosts = append(hosts, exchanger{host: strings.ToLower(strings.TrimSuffix(mx.Mx, ".")), pref: mx.Preference, secure: a.Secure})
	}
	if null && len(hosts) == 0 {
		return nil, &Error{Class: Permanent, Stage: StageResolve, Err: fmt.Errorf("domain %s accepts no mail (null MX, RFC 7505)", domain)}
	}
	if len(rrs) == 0 {
		// No MX: the domain itself is the exchanger (RFC 5321 section 5.1).
		return []exchanger{{host: domain, secure: a.Secure}}, nil
	}
	slices.SortStableFunc(hosts, func(a, b exchanger) int { return cmp.Compare(a.pref, b.pref) })
	if len(hosts) > maxMXHosts {
		hosts = hosts[:maxMXHosts]
	}
	return hosts, nil
}

func (m *MX) usable(ip netip.Addr) bool {
	return m.cfg.Policy.Check(ip) == nil
}

// mxSession is a session taken up to the accepted RCPTs.
type mxSession struct {
	a     *attempt
	host  string
	ip    netip.Addr
	rcpts []string
	ss    *session
	stop  func() bool // cancels the close-on-context
	done  bool
}

// wrap names the exchanger in an *Error from the shared steps.
func (s *mxSession) wrap(err error) error {
	e := err.(*Error)
	e.Err = fmt.Errorf("mail exchanger %s [%s]: %w", s.host, s.ip, e.Err)
	return e
}

// commit sends the message, like the second half of the relay's attempt.
func (s *mxSession) commit(ctx context.Context, raw []byte) error {
	if err := s.a.data(ctx, s.ss, raw); err != nil {
		s.close()
		return s.wrap(err)
	}
	s.a.stage = StageQuit
	c := s.ss.c
	c.CommandTimeout = min(s.a.cfg.CommandTimeout, quitTimeout)
	_ = c.Quit()
	s.close()
	return nil
}

// abort ends a session that will not send: QUIT before DATA discards the
// transaction.
func (s *mxSession) abort(ctx context.Context) {
	if s.done || s.ss == nil {
		return
	}
	if ctx.Err() == nil {
		s.ss.c.CommandTimeout = min(s.a.cfg.CommandTimeout, quitTimeout)
		_ = s.ss.c.Quit()
	}
	s.close()
}

func (s *mxSession) close() {
	if s.done || s.ss == nil {
		return
	}
	s.done = true
	s.stop()
	s.ss.raw.Close()
}
