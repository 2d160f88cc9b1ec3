// Package dnsresolve asks one DNS server (github.com/miekg/dns) for
// records, the way both MX delivery (internal/transport) and the domain
// checks (internal/dnscheck) need it: EDNS0 over UDP, once more after a
// lost datagram, TCP for a truncated answer, CNAME chains followed. It
// also finds the server to ask: a --dns-resolver value or the first
// nameserver of resolv.conf.
package dnsresolve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

const (
	// DefaultResolvConf is where the system's resolver is read from.
	DefaultResolvConf = "/etc/resolv.conf"
	// MaxCNAMEHops bounds a CNAME chain.
	MaxCNAMEHops = 8
	// UDPSize is the EDNS0 buffer size advertised (the DNS flag day 2020
	// value, which avoids IP fragmentation).
	UDPSize = 1232
)

// RcodeError is a server's answer other than NOERROR and NXDOMAIN.
type RcodeError struct{ Rcode int }

func (e *RcodeError) Error() string {
	return "the resolver answered " + dns.RcodeToString[e.Rcode]
}

// Exchange sends one query for name (fully qualified) to the server at
// addr. An answer other than NOERROR and NXDOMAIN is a *RcodeError; any
// other error is the network's (or ctx's), for the caller to describe.
func Exchange(ctx context.Context, addr string, timeout time.Duration, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.SetEdns0(UDPSize, false)
	// Ask a validating resolver to say whether it validated the answer
	// (the AD bit, RFC 6840 section 5.7): DANE trusts only those.
	m.AuthenticatedData = true
	c := &dns.Client{Net: "udp", Timeout: timeout, UDPSize: UDPSize}
	resp, _, err := c.ExchangeContext(ctx, m, addr)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil {
		// One lost datagram must not condemn the resolver: ask once more.
		resp, _, err = c.ExchangeContext(ctx, m, addr)
	}
	if err == nil && resp.Truncated {
		c.Net = "tcp"
		resp, _, err = c.ExchangeContext(ctx, m, addr)
	}
	if err != nil {
		return nil, err
	}
	switch resp.Rcode {
	case dns.RcodeSuccess, dns.RcodeNameError:
		return resp, nil
	}
	return nil, &RcodeError{Rcode: resp.Rcode}
}

// ExchangeFunc is one query, as Lookup makes it: Exchange, or a caller's
// wrapper that counts, caches or describes its errors.
type ExchangeFunc func(ctx context.Context, name string, qtype uint16) (*dns.Msg, error)

// Answer is the outcome of one lookup that the server answered.
type Answer struct {
	NXDomain bool     // the name (or the end of its CNAME chain) does not exist
	Records  []dns.RR // of the asked type, owned by the end of the chain
	Chain    []string // CNAME targets followed, in order, without final dot
	// Secure: every response of the lookup carried the AD bit — the
	// configured resolver validated it with DNSSEC (trusted only as far as
	// the path to that resolver is).
	Secure bool
}

// TXT returns the TXT records' strings, each record's strings joined.
func (a *Answer) TXT() []string {
	var out []string
	for _, rr := range a.Records {
		if t, ok := rr.(*dns.TXT); ok {
			out = append(out, strings.Join(t.Txt, ""))
		}
	}
	return out
}

// Addrs returns the addresses of the answer's A and AAAA records.
func (a *Answer) Addrs() []netip.Addr {
	var out []netip.Addr
	for _, rr := range a.Records {
		var ip netip.Addr
		switch v := rr.(type) {
		case *dns.A:
			ip, _ = netip.AddrFromSlice(v.A.To4())
		case *dns.AAAA:
			ip, _ = netip.AddrFromSlice(v.AAAA)
		}
		if ip.IsValid() {
			out = append(out, ip)
		}
	}
	return out
}

// Lookup resolves name (with or without the final dot) for qtype through
// exchange, following CNAMEs in the answer and, when the server answered
// only with the alias, by querying the target.
func Lookup(ctx context.Context, exchange ExchangeFunc, name string, qtype uint16) (*Answer, error) {
	name = strings.ToLower(dns.Fqdn(name))
	a := &Answer{Secure: true}
	target := name
	for hop := 0; ; hop++ {
		if hop > MaxCNAMEHops {
			return nil, fmt.Errorf("CNAME chain from %s is longer than %d", TrimDot(name), MaxCNAMEHops)
		}
		msg, err := exchange(ctx, target, qtype)
		if err != nil {
			return nil, err
		}
		a.Secure = a.Secure && msg.AuthenticatedData
		end, chain := followChain(msg.Answer, target, qtype)
		a.Chain = append(a.Chain, chain...)
		for _, rr := range msg.Answer {
			if rr.Header().Rrtype == qtype && strings.EqualFold(rr.Header().Name, end) {
				a.Records = append(a.Records, rr)
			}
		}
		if msg.Rcode == dns.RcodeNameError {
			a.NXDomain = true
		}
		// Done unless the server stopped at an alias it did not resolve.
		if len(a.Records) > 0 || a.NXDomain || end == target || qtype == dns.TypeCNAME {
			return a, nil
		}
		target = end
	}
}

// followChain walks the CNAMEs of an answer section from name and returns
// the last owner reached and the targets passed.
func followChain(rrs []dns.RR, name string, qtype uint16) (string, []string) {
	var chain []string
	for range MaxCNAMEHops {
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
		chain = append(chain, TrimDot(next))
		name = next
	}
	return name, chain
}

// SystemAddr returns the first nameserver of a resolv.conf file as
// host:port.
func SystemAddr(path string) (string, error) {
	cfg, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return "", fmt.Errorf("%s is unreadable: %w", path, err)
	}
	if len(cfg.Servers) == 0 {
		return "", fmt.Errorf("%s lists no nameserver", path)
	}
	port := cfg.Port
	if port == "" {
		port = "53"
	}
	return net.JoinHostPort(cfg.Servers[0], port), nil
}

// ParseAddr validates a resolver's "host:port", or a bare host (port 53),
// and returns it as host:port.
func ParseAddr(s string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), "53"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || host == "" || strings.ContainsAny(host, " /@") {
		return "", fmt.Errorf("DNS resolver %q: want host:port, for example 127.0.0.1:53", s)
	}
	return net.JoinHostPort(host, port), nil
}

// TrimDot drops a name's final dot.
func TrimDot(s string) string { return strings.TrimSuffix(s, ".") }
