package transport

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/sendonce/sendonce/internal/dnsresolve"
)

// Source is an egress source of the mx transport: an address its
// connections bind to, and the name it gives in EHLO.
type Source struct {
	Name string
	IP   netip.Addr
	// EHLO is the name said in EHLO; "" is the transport's HELOName.
	EHLO string
}

// ParseSource reads an --egress-source value: NAME=IP[,ehlo=HOSTNAME].
func ParseSource(s string) (Source, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" || strings.ContainsAny(name, ", ") {
		return Source{}, fmt.Errorf("egress source %q: want NAME=IP[,ehlo=HOSTNAME]", s)
	}
	ipStr, opts, _ := strings.Cut(rest, ",")
	ip, err := netip.ParseAddr(ipStr)
	if err != nil {
		return Source{}, fmt.Errorf("egress source %q: %q is not an IP address", s, ipStr)
	}
	src := Source{Name: name, IP: ip.Unmap()}
	if opts != "" {
		for _, o := range strings.Split(opts, ",") {
			k, v, _ := strings.Cut(o, "=")
			if k != "ehlo" || !validHostname(v) {
				return Source{}, fmt.Errorf("egress source %q: unknown option or invalid host name %q (want ehlo=HOSTNAME)", s, o)
			}
			src.EHLO = v
		}
	}
	return src, nil
}

// validHostname accepts a name fit for EHLO: labels of letters, digits
// and hyphens.
func validHostname(h string) bool {
	return h != "" && len(h) <= 253 && dnsresolve.ValidHostName(h)
}

// ValidHELOName reports whether h may be said in EHLO (--helo-name).
func ValidHELOName(h string) bool { return validHostname(h) }
