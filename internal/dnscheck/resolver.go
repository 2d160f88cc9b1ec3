package dnscheck

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/miekg/dns"
)

const (
	// maxQueries bounds the DNS queries of one check: SPF includes of
	// includes cannot make it run away.
	maxQueries = 150
	// maxCNAMEHops bounds a CNAME chain.
	maxCNAMEHops = 8
	// udpSize is the EDNS0 buffer size advertised (the DNS flag day 2020
	// value, which avoids IP fragmentation).
	udpSize = 1232
)

// errResolverDown is wrapped by every query after one failed on the
// network.
var errResolverDown = errors.New("resolver unreachable")

// answer is the outcome of one lookup that the resolver answered.
type answer struct {
	nxdomain bool     // the name (or the end of its CNAME chain) does not exist
	records  []dns.RR // of the asked type, owned by the end of the chain
	chain    []string // CNAME targets followed, in order, without final dot
}

// txt returns the TXT records' strings, each record's strings joined.
func (a *answer) txt() []string {
	var out []string
	for _, rr := range a.records {
		if t, ok := rr.(*dns.TXT); ok {
			out = append(out, strings.Join(t.Txt, ""))
		}
	}
	return out
}

type question struct {
	name  string
	qtype uint16
}

// resolver queries one server, caching answers for the life of one check.
// It is not safe for concurrent use.
type resolver struct {
	addr    string
	timeout time.Duration
	cache   map[question]*answer
	queries int
	down    error // set after a network failure
}

func newResolver(addr string, timeout time.Duration) *resolver {
	return &resolver{addr: addr, timeout: timeout, cache: make(map[question]*answer)}
}

// lookup resolves name (with or without the final dot) for qtype,
// following CNAMEs in the answer and, when the server answered only with
// the alias, by querying the target.
func (r *resolver) lookup(ctx context.Context, name string, qtype uint16) (*answer, error) {
	name = strings.ToLower(dns.Fqdn(name))
	q := question{name, qtype}
	if a, ok := r.cache[q]; ok {
		return a, nil
	}
	a := &answer{}
	target := name
	for hop := 0; ; hop++ {
		if hop > maxCNAMEHops {
			return nil, fmt.Errorf("CNAME chain from %s is longer than %d", trimDot(name), maxCNAMEHops)
		}
		msg, err := r.exchange(ctx, target, qtype)
		if err != nil {
			return nil, err
		}
		end, chain := followChain(msg.Answer, target, qtype)
		a.chain = append(a.chain, chain...)
		for _, rr := range msg.Answer {
			if rr.Header().Rrtype == qtype && strings.EqualFold(rr.Header().Name, end) {
				a.records = append(a.records, rr)
			}
		}
		if msg.Rcode == dns.RcodeNameError {
			a.nxdomain = true
		}
		// Done unless the server stopped at an alias it did not resolve.
		if len(a.records) > 0 || a.nxdomain || end == target || qtype == dns.TypeCNAME {
			break
		}
		target = end
	}
	r.cache[q] = a
	return a, nil
}

// followChain walks the CNAMEs of an answer section from name and returns
// the last owner reached and the targets passed.
func followChain(rrs []dns.RR, name string, qtype uint16) (string, []string) {
	var chain []string
	for range maxCNAMEHops {
		var next string
		for _, rr := range rrs {
			if c, ok := rr.(*dns.CNAME); ok && qtype != dns.TypeCNAME && strings.EqualFold(c.Hdr.Name, name) {
				next = strings.ToLower(c.Target)
				break
			}
		}
		if next == "" {
			break
		}
		chain = append(chain, trimDot(next))
		name = next
	}
	return name, chain
}

// exchange sends one query over UDP (twice if the first times out), and
// again over TCP when the answer is truncated. Answers other than NOERROR
// and NXDOMAIN are errors.
func (r *resolver) exchange(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	desc := fmt.Sprintf("%s %s", dns.TypeToString[qtype], trimDot(name))
	if r.down != nil {
		return nil, fmt.Errorf("%s: %w", desc, r.down)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", desc, err)
	}
	if r.queries >= maxQueries {
		return nil, fmt.Errorf("%s: more than %d DNS queries in one check", desc, maxQueries)
	}
	r.queries++
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.SetEdns0(udpSize, false)
	c := &dns.Client{Net: "udp", Timeout: r.timeout, UDPSize: udpSize}
	resp, _, err := c.ExchangeContext(ctx, m, r.addr)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil {
		// One lost datagram must not condemn the resolver: ask once more.
		resp, _, err = c.ExchangeContext(ctx, m, r.addr)
	}
	if err == nil && resp.Truncated {
		c.Net = "tcp"
		resp, _, err = c.ExchangeContext(ctx, m, r.addr)
	}
	if err != nil {
		if ctx.Err() == nil {
			r.down = fmt.Errorf("%w: %s: %w", errResolverDown, r.addr, err)
			return nil, fmt.Errorf("%s: %w", desc, r.down)
		}
		return nil, fmt.Errorf("%s: %w", desc, context.Cause(ctx))
	}
	switch resp.Rcode {
	case dns.RcodeSuccess, dns.RcodeNameError:
		return resp, nil
	}
	return nil, fmt.Errorf("%s: the resolver answered %s", desc, dns.RcodeToString[resp.Rcode])
}

// systemResolver returns the first name server of a resolv.conf file as
// host:port.
func systemResolver(path string) (string, error) {
	cfg, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return "", fmt.Errorf("dnscheck: no resolver given and %s is unreadable: %w", path, err)
	}
	if len(cfg.Servers) == 0 {
		return "", fmt.Errorf("dnscheck: no resolver given and %s lists no nameserver", path)
	}
	port := cfg.Port
	if port == "" {
		port = "53"
	}
	return net.JoinHostPort(cfg.Servers[0], port), nil
}

// resolverAddr validates a "host:port" or bare host (port 53).
func resolverAddr(s string) (string, error) {
	if _, _, err := net.SplitHostPort(s); err == nil {
		return s, nil
	}
	host := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if host == "" || strings.ContainsAny(host, " /") {
		return "", fmt.Errorf("dnscheck: invalid resolver %q (want host:port)", s)
	}
	return net.JoinHostPort(host, "53"), nil
}

func trimDot(s string) string { return strings.TrimSuffix(s, ".") }
