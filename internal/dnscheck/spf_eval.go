package dnscheck

// Evaluating an SPF record for one address (RFC 7208 section 4.6).

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// SPF results (RFC 7208 section 2.6), plus unknown for what this check
// cannot evaluate without a message (macros, ptr, exists).
const (
	spfPass      = "pass"
	spfFail      = "fail"
	spfSoftFail  = "softfail"
	spfNeutral   = "neutral"
	spfNone      = "none"
	spfPermError = "permerror"
	spfTempError = "temperror"
	spfUnknown   = "unknown"
)

// spfEval evaluates check_host() for one address.
type spfEval struct {
	c       *checker
	lookups int
}

func (e *spfEval) eval(domain string, ip netip.Addr, depth int) (string, string) {
	if depth > spfMaxDepth {
		return spfPermError, "includes nest more than 10 deep"
	}
	f := e.c.fetchSPF(domain)
	switch {
	case f.err != nil:
		return spfTempError, f.err.Error()
	case len(f.records) == 0:
		return spfNone, domain + " has no SPF record"
	case len(f.records) > 1 || len(f.syntax) > 0:
		return spfPermError, "the record of " + domain + " is invalid"
	}
	for _, m := range f.rec.mechs {
		switch m.name {
		case "include", "a", "mx", "ptr", "exists":
			if e.lookups++; e.lookups > spfLookupLimit {
				return spfPermError, "the record needs more than 10 DNS lookups"
			}
		}
		matched, res, why := e.match(m, domain, ip, depth)
		if res != "" {
			return res, why
		}
		if matched {
			return qualResult(m.qual), fmt.Sprintf("%q matches in the record of %s", m.text, domain)
		}
	}
	if f.rec.redirect != "" {
		if strings.Contains(f.rec.redirect, "%") {
			return spfUnknown, "redirect= uses macros"
		}
		if e.lookups++; e.lookups > spfLookupLimit {
			return spfPermError, "the record needs more than 10 DNS lookups"
		}
		res, why := e.eval(f.rec.redirect, ip, depth+1)
		if res == spfNone {
			return spfPermError, "redirect=" + f.rec.redirect + " has no SPF record"
		}
		return res, why
	}
	return spfNeutral, "no mechanism of the record of " + domain + " matches (the default is neutral)"
}

// match returns whether m matches ip, or a final result (a non-empty res)
// when evaluation cannot go on.
func (e *spfEval) match(m spfMech, domain string, ip netip.Addr, depth int) (matched bool, res, why string) {
	target := domain
	if m.domain != "" {
		target = m.domain
	}
	switch m.name {
	case "all":
		return true, "", ""
	case "ip4", "ip6":
		return m.net.Contains(ip), "", ""
	case "ptr", "exists":
		return false, spfUnknown, fmt.Sprintf("%q cannot be evaluated without a message", m.text)
	}
	if m.macro {
		return false, spfUnknown, fmt.Sprintf("%q uses macros", m.text)
	}
	switch m.name {
	case "include":
		r, w := e.eval(target, ip, depth+1)
		switch r {
		case spfPass:
			return true, "", ""
		case spfFail, spfSoftFail, spfNeutral:
			return false, "", ""
		case spfNone:
			return false, spfPermError, m.text + " names a domain without SPF record"
		}
		return false, r, w
	case "a":
		return e.matchHost(target, ip, m)
	case "mx":
		a, err := e.c.lookup(target, dns.TypeMX)
		if err != nil {
			return false, spfTempError, err.Error()
		}
		for i, rr := range a.Records {
			if i >= spfMaxMXNames {
				return false, spfPermError, m.text + " names more than 10 hosts"
			}
			if ok, res, why := e.matchHost(rr.(*dns.MX).Mx, ip, m); ok || res != "" {
				return ok, res, why
			}
		}
	}
	return false, "", ""
}

func (e *spfEval) matchHost(host string, ip netip.Addr, m spfMech) (bool, string, string) {
	qtype, bits := dns.TypeA, m.cidr4
	if ip.Is6() {
		qtype, bits = dns.TypeAAAA, m.cidr6
	}
	a, err := e.c.lookup(host, qtype)
	if err != nil {
		return false, spfTempError, err.Error()
	}
	for _, addr := range a.Addrs() {
		if p, err := addr.Prefix(bits); err == nil && p.Contains(ip) {
			return true, "", ""
		}
	}
	return false, "", ""
}

func qualResult(q byte) string {
	switch q {
	case '-':
		return spfFail
	case '~':
		return spfSoftFail
	case '?':
		return spfNeutral
	}
	return spfPass
}
