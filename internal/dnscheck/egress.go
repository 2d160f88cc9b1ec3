package dnscheck

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// Egress is one address mail leaves from (an mx egress source) and the
// name it says in EHLO.
type Egress struct {
	Name string // the source's name, for the findings
	IP   netip.Addr
	EHLO string
}

// checkEgress is forward-confirmed reverse DNS of each egress source: its
// PTR record names a host whose A or AAAA records give the address back,
// and the source says that name in EHLO. Large receivers refuse or junk
// mail from addresses without it (Gmail's sender guidelines require it).
func (c *checker) checkEgress() {
	for _, src := range c.opts.Egress {
		if c.ctx.Err() != nil {
			return
		}
		before := len(c.rep.Findings)
		c.checkSource(src)
		c.egress = append(c.egress, egressOutcome{src: src, findings: slices.Clone(c.rep.Findings[before:])})
	}
}

// egressOutcome is one source's findings, for the bulk sender rules.
type egressOutcome struct {
	src      Egress
	findings []Finding
}

func (c *checker) checkSource(src Egress) {
	rev, err := dns.ReverseAddr(src.IP.String())
	if err != nil {
		c.fail(CheckEgress, fmt.Sprintf("Egress source %s: %s is not an address whose reverse name can be looked up.", src.Name, src.IP), "")
		return
	}
	a, err := c.lookup(rev, dns.TypePTR)
	if err != nil {
		c.lookupFailed(CheckEgress, err)
		return
	}
	var names []string
	for _, rr := range a.Records {
		if p, ok := rr.(*dns.PTR); ok {
			names = append(names, strings.ToLower(trimDot(p.Ptr)))
		}
	}
	if len(names) == 0 {
		c.fail(CheckEgress, fmt.Sprintf("Egress source %s (%s) has no PTR record: many receivers refuse mail from an address without reverse DNS.", src.Name, src.IP),
			fmt.Sprintf("Ask whoever runs %s's network to publish a PTR record for it naming this host, e.g. %s.", src.IP, cmp.Or(src.EHLO, "mail.example.com")))
		return
	}
	var confirmed []string
	for _, n := range names {
		addrs, _, err := c.addresses(n)
		if err != nil {
			c.lookupFailed(CheckEgress, err)
			return
		}
		if slices.Contains(addrs, src.IP) {
			confirmed = append(confirmed, n)
		}
	}
	if len(confirmed) == 0 {
		c.fail(CheckEgress, fmt.Sprintf("Egress source %s (%s): its PTR record names %s, which does not resolve back to %s (reverse DNS not forward-confirmed).",
			src.Name, src.IP, strings.Join(names, ", "), src.IP),
			fmt.Sprintf("Publish an A (or AAAA) record of %s with the address %s.", names[0], src.IP))
		return
	}
	ehlo := strings.ToLower(trimDot(src.EHLO))
	if !slices.Contains(confirmed, ehlo) {
		c.warn(CheckEgress, fmt.Sprintf("Egress source %s (%s) says EHLO %s, but its forward-confirmed reverse name is %s.", src.Name, src.IP, src.EHLO, confirmed[0]),
			fmt.Sprintf("Give the source that name: --egress-source %s=%s,ehlo=%s (or --helo-name %s).", src.Name, src.IP, confirmed[0], confirmed[0]))
		return
	}
	c.ok(CheckEgress, "Egress source %s (%s): reverse DNS %s is forward-confirmed and is its EHLO name.", src.Name, src.IP, ehlo)
}
