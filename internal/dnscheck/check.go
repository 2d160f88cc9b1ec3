package dnscheck

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"

	"github.com/sendonce/sendonce/internal/defaults"
	"github.com/sendonce/sendonce/internal/dnsresolve"
)

// Defaults applied by Check to zero fields of Options.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultQueryTimeout = 5 * time.Second
	// DefaultResolvConf is where the default resolver is read from.
	DefaultResolvConf = dnsresolve.DefaultResolvConf
)

// The checks a Finding belongs to.
const (
	CheckMX    = "mx"
	CheckSPF   = "spf"
	CheckDKIM  = "dkim"
	CheckDMARC = "dmarc"
	// CheckEgress is the reverse DNS of the addresses mail leaves from
	// (Options.Egress).
	CheckEgress = "egress"
)

// Level grades a finding.
type Level string

const (
	// OK means nothing to do.
	OK Level = "ok"
	// Warning means mail goes out, but deliverability or protection
	// suffers; the Fix says what to improve.
	Warning Level = "warning"
	// Error means receivers will reject, junk or fail to authenticate the
	// mail, or the domain cannot be checked; the Fix says what to do.
	Error Level = "error"
)

func (l Level) rank() int {
	switch l {
	case Error:
		return 2
	case Warning:
		return 1
	}
	return 0
}

// Options configures Check.
type Options struct {
	// Domain is the sending domain (the From domain). Required.
	Domain string
	// Selector is the DKIM selector. When empty the DKIM check is skipped
	// with a warning.
	Selector string
	// Resolver is the DNS server to query, "host:port" (port 53 when only
	// a host is given). Defaults to the first nameserver of ResolvConf.
	Resolver string
	// ResolvConf is the file the default resolver is read from. Defaults
	// to /etc/resolv.conf.
	ResolvConf string
	// ExpectedDKIMKey, when set, is the public key sendonce signs with
	// (*rsa.PublicKey or ed25519.PublicKey); the published key must equal
	// it.
	ExpectedDKIMKey crypto.PublicKey
	// RelayIPs and RelayHost, when set, are the addresses mail leaves from
	// (the relay, or this host with the mx transport); SPF must pass for
	// each of them. RelayHost is resolved (A and AAAA) through Resolver.
	RelayIPs  []netip.Addr
	RelayHost string
	// EnvelopeDomain is the domain of the envelope sender (Return-Path),
	// for SPF alignment. Defaults to Domain: sendonce uses the From address
	// as the envelope sender.
	EnvelopeDomain string
	// Egress, when set, are the addresses the mx transport sends from:
	// each must have forward-confirmed reverse DNS naming what it says in
	// EHLO (CheckEgress).
	Egress []Egress
	// Timeout bounds the whole check. Defaults to 30 seconds.
	Timeout time.Duration
	// QueryTimeout bounds each DNS query. Defaults to 5 seconds.
	QueryTimeout time.Duration
	// Bulk, when set, adds the bulk sender rules section (CheckBulk).
	Bulk *BulkRules
}

// Finding is one conclusion of a check.
type Finding struct {
	Check string `json:"check"` // CheckMX, CheckSPF, CheckDKIM, CheckDMARC, CheckEgress or CheckBulk
	// Rule names the bulk sender rule of a CheckBulk finding (RuleSPF, …).
	Rule    string `json:"rule,omitempty"`
	Level   Level  `json:"level"`
	Message string `json:"message"`
	// Fix says how to fix a warning or an error; empty when Level is OK.
	Fix string `json:"fix,omitempty"`
}

// Report is the outcome of Check.
type Report struct {
	Domain   string    `json:"domain"`
	Selector string    `json:"selector,omitempty"`
	Resolver string    `json:"resolver"`
	Findings []Finding `json:"findings"`
}

// Level returns the worst level of the findings (OK when there are none).
func (r *Report) Level() Level {
	worst := OK
	for _, f := range r.Findings {
		if f.Level.rank() > worst.rank() {
			worst = f.Level
		}
	}
	return worst
}

// Count returns the number of findings of level l.
func (r *Report) Count(l Level) int {
	n := 0
	for _, f := range r.Findings {
		if f.Level == l {
			n++
		}
	}
	return n
}

// Check runs the MX, SPF, DKIM and DMARC checks of opts.Domain. It returns
// an error only for invalid options or when ctx is done; DNS failures are
// error findings.
func Check(ctx context.Context, opts Options) (*Report, error) {
	domain, err := normalizeDomain(opts.Domain)
	if err != nil {
		return nil, err
	}
	selector := strings.ToLower(strings.TrimSpace(opts.Selector))
	if selector != "" && !validName(selector) {
		return nil, fmt.Errorf("dnscheck: invalid selector %q", opts.Selector)
	}
	envDomain := domain
	if opts.EnvelopeDomain != "" {
		if envDomain, err = normalizeDomain(opts.EnvelopeDomain); err != nil {
			return nil, fmt.Errorf("dnscheck: envelope domain: %w", err)
		}
	}
	addr := opts.Resolver
	if addr == "" {
		conf := opts.ResolvConf
		defaults.Set(&conf, DefaultResolvConf)
		if addr, err = dnsresolve.SystemAddr(conf); err != nil {
			return nil, fmt.Errorf("dnscheck: no resolver given and %w", err)
		}
	} else if addr, err = dnsresolve.ParseAddr(addr); err != nil {
		return nil, fmt.Errorf("dnscheck: %w", err)
	}
	timeout := opts.Timeout
	defaults.Set(&timeout, DefaultTimeout)
	qt := opts.QueryTimeout
	defaults.Set(&qt, DefaultQueryTimeout)
	cctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("the check took longer than %v", timeout))
	defer cancel()

	c := &checker{
		ctx:       cctx,
		opts:      opts,
		domain:    domain,
		selector:  selector,
		envDomain: envDomain,
		r:         newResolver(addr, qt),
		rep:       &Report{Domain: domain, Selector: selector, Resolver: addr, Findings: []Finding{}},
		spf:       make(map[string]*spfFetch),
	}
	exists := c.checkMX()
	if exists {
		c.checkSPF()
		c.checkDKIM()
		c.checkDMARC()
	}
	c.checkEgress()
	if exists && opts.Bulk != nil && c.ctx.Err() == nil {
		c.checkBulk(opts.Bulk) // judged on the findings above
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.rep, nil
}

// checker holds the state of one Check.
type checker struct {
	ctx       context.Context
	opts      Options
	domain    string
	selector  string
	envDomain string
	r         *resolver
	rep       *Report
	spf       map[string]*spfFetch // SPF records fetched, by domain
	egress    []egressOutcome      // what checkEgress found, per source
}

func (c *checker) ok(check, format string, args ...any) {
	c.rep.Findings = append(c.rep.Findings, Finding{Check: check, Level: OK, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) warn(check, msg, fix string) {
	c.rep.Findings = append(c.rep.Findings, Finding{Check: check, Level: Warning, Message: msg, Fix: fix})
}

func (c *checker) fail(check, msg, fix string) {
	c.rep.Findings = append(c.rep.Findings, Finding{Check: check, Level: Error, Message: msg, Fix: fix})
}

// lookupFailed reports a query that got no usable answer.
func (c *checker) lookupFailed(check string, err error) {
	fix := fmt.Sprintf("Check that the resolver %s answers and that the name servers of %s are reachable, then run the check again.", c.r.addr, c.domain)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) || c.ctx.Err() != nil {
		fix = fmt.Sprintf("Check that the resolver %s answers, or run the check again with a longer timeout or another resolver (--resolver).", c.r.addr)
	}
	c.fail(check, fmt.Sprintf("DNS lookup failed: %v.", err), fix)
}

func (c *checker) lookup(name string, qtype uint16) (*answer, error) {
	return c.r.lookup(c.ctx, name, qtype)
}

// addresses returns the A and AAAA records of host.
func (c *checker) addresses(host string) ([]netip.Addr, *answer, error) {
	var out []netip.Addr
	var first *answer
	for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
		a, err := c.lookup(host, t)
		if err != nil {
			return nil, nil, err
		}
		if first == nil {
			first = a
		}
		out = append(out, a.Addrs()...)
	}
	return out, first, nil
}

// orgDomain returns the organizational domain (RFC 7489 section 3.2): the
// public suffix plus one label.
func orgDomain(d string) string {
	o, err := publicsuffix.EffectiveTLDPlusOne(d)
	if err != nil {
		return d
	}
	return o
}

// normalizeDomain returns the lower-case A-label form of a host name
// without its final dot.
func normalizeDomain(s string) (string, error) {
	d := strings.TrimSuffix(strings.TrimSpace(s), ".")
	if d == "" {
		return "", errors.New("dnscheck: no domain given")
	}
	a, err := idna.Lookup.ToASCII(d)
	if err != nil || !strings.Contains(a, ".") || !validName(a) {
		return "", fmt.Errorf("dnscheck: invalid domain %q: want a name such as example.com", s)
	}
	return strings.ToLower(a), nil
}

// validName accepts dot-separated labels of letters, digits, hyphens and
// underscores (service labels such as _spf are common in SPF).
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			ch := l[i]
			if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_') {
				return false
			}
		}
	}
	return true
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
