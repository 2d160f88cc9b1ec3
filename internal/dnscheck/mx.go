package dnscheck

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// maxMXHosts bounds the MX hosts whose addresses are checked.
const maxMXHosts = 10

// checkMX reports whether the domain can receive mail. It returns false
// when the domain does not exist, which makes the other checks pointless.
func (c *checker) checkMX() bool {
	a, err := c.lookup(c.domain, dns.TypeMX)
	if err != nil {
		c.lookupFailed(CheckMX, err)
		return true
	}
	if a.NXDomain {
		c.fail(CheckMX, fmt.Sprintf("%s does not exist in DNS (NXDOMAIN), so none of its records can be checked.", c.domain),
			fmt.Sprintf("Check the spelling of the domain; if it is right, register %s or add it at its DNS host.", c.domain))
		return false
	}
	var mxs []*dns.MX
	for _, rr := range a.Records {
		mxs = append(mxs, rr.(*dns.MX))
	}
	if len(mxs) == 0 {
		c.noMX()
		return true
	}
	slices.SortStableFunc(mxs, func(x, y *dns.MX) int { return cmp.Compare(x.Preference, y.Preference) })

	null := 0
	for _, mx := range mxs {
		if mx.Mx == "." {
			null++
		}
	}
	switch {
	case null > 0 && len(mxs) == 1:
		c.fail(CheckMX, fmt.Sprintf("%s publishes a null MX (RFC 7505): it declares that it accepts no mail, so replies and bounces are lost and receivers may refuse its mail.", c.domain),
			fmt.Sprintf("If %s sends mail, replace the null MX with an MX record naming a host that receives mail for it.", c.domain))
		return true
	case null > 0:
		c.fail(CheckMX, fmt.Sprintf("%s mixes a null MX (\".\") with other MX records, which RFC 7505 forbids.", c.domain),
			"Delete the MX record whose target is \".\".")
	}

	var names []string
	for _, mx := range mxs {
		if mx.Mx != "." {
			names = append(names, fmt.Sprintf("%s (preference %d)", trimDot(mx.Mx), mx.Preference))
		}
	}
	c.ok(CheckMX, "%s has %s: %s.", c.domain, plural(len(names), "mail exchanger", "mail exchangers"), strings.Join(names, ", "))

	checked := 0
	for _, mx := range mxs {
		host := trimDot(strings.ToLower(mx.Mx))
		if mx.Mx == "." {
			continue
		}
		if checked++; checked > maxMXHosts {
			break
		}
		if _, err := netip.ParseAddr(host); err == nil {
			c.fail(CheckMX, fmt.Sprintf("The MX record of %s names the IP address %s; an MX must name a host.", c.domain, host),
				fmt.Sprintf("Publish an A record for a host name (mx.%s, say) with that address and point the MX at the name.", c.domain))
			continue
		}
		addrs, a, err := c.addresses(host)
		if err != nil {
			c.lookupFailed(CheckMX, err)
			continue
		}
		if len(addrs) == 0 {
			c.fail(CheckMX, fmt.Sprintf("The mail exchanger %s has no A or AAAA record, so mail to %s cannot reach it.", host, c.domain),
				fmt.Sprintf("Publish an address record for %s, or point the MX at a host that has one.", host))
			continue
		}
		if len(a.Chain) > 0 {
			c.warn(CheckMX, fmt.Sprintf("The mail exchanger %s is an alias (CNAME) of %s; RFC 2181 forbids MX records that name an alias, and some senders refuse them.", host, a.Chain[len(a.Chain)-1]),
				fmt.Sprintf("Point the MX record at %s directly.", a.Chain[len(a.Chain)-1]))
		}
	}
	return true
}

// noMX reports a domain without MX records: mail goes to its address
// records (RFC 5321 section 5.1), if it has any.
func (c *checker) noMX() {
	addrs, _, err := c.addresses(c.domain)
	if err != nil {
		c.lookupFailed(CheckMX, err)
		return
	}
	if len(addrs) > 0 {
		c.warn(CheckMX, fmt.Sprintf("%s has no MX record; mail to it goes to its address record (%s) as an implicit MX, and some receivers distrust senders without an MX.", c.domain, addrs[0]),
			fmt.Sprintf("Publish an MX record for %s naming the host that receives its replies and bounces.", c.domain))
		return
	}
	c.fail(CheckMX, fmt.Sprintf("%s has no MX record and no address record: it cannot receive replies or bounces, and many receivers refuse mail from such domains.", c.domain),
		fmt.Sprintf("Publish an MX record for %s naming a host that receives mail for it.", c.domain))
}
