package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// ErrBlocked is in the chain of every error for an address the policy
// refuses.
var ErrBlocked = errors.New("address not allowed by the outbound policy")

// BlockedError says which address was refused.
type BlockedError struct {
	Addr netip.Addr
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("%s: %v (see --outbound-allow)", e.Addr, ErrBlocked)
}

// Is makes errors.Is(err, ErrBlocked) true.
func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

// special lists the IANA special-purpose ranges (RFC 6890 and later) that
// are not global unicast, plus the IPv6 ranges that embed an IPv4 address
// and could carry a connection to a private one (NAT64, 6to4, Teredo,
// IPv4-compatible). Loopback, private, link-local and unique-local ranges
// are here too; the keyword "private" re-allows those.
var special = prefixes(
	// IPv4
	"0.0.0.0/8",       // "this network"; 0.0.0.0 reaches the local host
	"10.0.0.0/8",      // private
	"100.64.0.0/10",   // shared address space (carrier NAT, cloud VPCs)
	"127.0.0.0/8",     // loopback
	"169.254.0.0/16",  // link-local (cloud metadata at 169.254.169.254)
	"172.16.0.0/12",   // private
	"192.0.0.0/24",    // IETF protocol assignments
	"192.0.2.0/24",    // documentation
	"192.88.99.0/24",  // 6to4 relay anycast
	"192.168.0.0/16",  // private
	"198.18.0.0/15",   // benchmarking
	"198.51.100.0/24", // documentation
	"203.0.113.0/24",  // documentation
	"224.0.0.0/4",     // multicast
	"240.0.0.0/4",     // reserved, and the broadcast address
	// IPv6
	"::/96",          // unspecified, loopback, IPv4-compatible (deprecated)
	"::ffff:0:0/96",  // IPv4-mapped: unmapped before judging, listed for safety
	"64:ff9b::/96",   // NAT64
	"64:ff9b:1::/48", // local-use NAT64
	"100::/64",       // discard
	"2001::/23",      // IETF protocol assignments (Teredo among them)
	"2001:db8::/32",  // documentation
	"2002::/16",      // 6to4
	"3fff::/20",      // documentation
	"fc00::/7",       // unique local
	"fe80::/10",      // link-local
	"fec0::/10",      // site-local (deprecated)
	"ff00::/8",       // multicast
)

// privateRanges is what the keyword "private" allows: the ranges a host's
// own network uses (loopback, RFC 1918, shared, unique local). Link-local
// is not among them: 169.254.169.254 is the cloud's metadata service,
// whose credentials no webhook or relay should reach; an operator who
// means it lists 169.254.0.0/16 or fe80::/10 by name.
var privateRanges = prefixes(
	"10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
	"::1/128", "fc00::/7",
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// Policy decides which addresses sendonce may connect to on a caller's
// behalf. The zero value and nil allow global unicast only. A Policy is
// immutable and safe for concurrent use.
type Policy struct {
	allow []netip.Prefix // exceptions to special, unmapped
}

// Parse reads an --outbound-allow value: a comma-separated list of CIDR
// prefixes or single addresses, and the keyword "private" (loopback,
// RFC 1918, shared, link-local and unique-local ranges). The empty string
// is the default policy. Unspecified, multicast and broadcast addresses
// are never allowed, whatever the list says: no service listens there.
func Parse(s string) (*Policy, error) {
	p := &Policy{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
			continue
		case strings.EqualFold(item, "private"):
			p.allow = append(p.allow, privateRanges...)
			continue
		}
		pf, err := netip.ParsePrefix(item)
		if err != nil {
			a, aerr := netip.ParseAddr(item)
			if aerr != nil {
				return nil, fmt.Errorf("outbound allow list: %q is neither a CIDR prefix, an address nor \"private\"", item)
			}
			a = a.Unmap()
			pf = netip.PrefixFrom(a, a.BitLen())
		}
		if pf.Addr().Is4In6() {
			bits := pf.Bits() - 96
			if bits < 0 {
				return nil, fmt.Errorf("outbound allow list: %q is wider than the IPv4-mapped range", item)
			}
			pf = netip.PrefixFrom(pf.Addr().Unmap(), bits)
		}
		p.allow = append(p.allow, pf.Masked())
	}
	return p, nil
}

// MustParse is Parse for tests and constants; it panics on error.
func MustParse(s string) *Policy {
	p, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return p
}

// With returns a policy that also allows what extra allows (for example,
// webhooks with --webhook-allow-private: p.With(MustParse("private"))).
func (p *Policy) With(extra *Policy) *Policy {
	out := &Policy{}
	if p != nil {
		out.allow = append(out.allow, p.allow...)
	}
	if extra != nil {
		out.allow = append(out.allow, extra.allow...)
	}
	return out
}

// Check returns nil when the policy allows connecting to ip, else a
// *BlockedError.
func (p *Policy) Check(ip netip.Addr) error {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() || ip.IsUnspecified() || ip.IsMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return &BlockedError{Addr: ip}
	}
	if !isSpecial(ip) {
		return nil
	}
	if p != nil {
		for _, pf := range p.allow {
			if pf.Contains(ip) {
				return nil
			}
		}
	}
	return &BlockedError{Addr: ip}
}

func isSpecial(ip netip.Addr) bool {
	for _, pf := range special {
		if pf.Contains(ip) {
			return true
		}
	}
	if ip.Is6() && !netip.MustParsePrefix("2000::/3").Contains(ip) {
		// Outside the global unicast allocation: reserved or unassigned.
		return true
	}
	return false
}

// Control is a net.Dialer Control function: it runs after every address
// of a name was resolved and before each connect, so it judges the address
// actually dialled.
func (p *Policy) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("outbound: unexpected dial address %q: %w", address, err)
	}
	return p.Check(ap.Addr())
}

// Dialer returns a net.Dialer that connects only where the policy allows.
// timeout 0 means the system's.
func (p *Policy) Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, Control: p.Control}
}

// DialContext dials through Dialer(0); its signature fits
// http.Transport.DialContext and the transports' DialContext fields.
func (p *Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return p.Dialer(0).DialContext(ctx, network, address)
}

// HTTPTransport returns an http.Transport for webhook deliveries and
// attachment downloads: every connection goes through the policy, and no
// proxy from the environment is used (a proxy would connect on our behalf
// where the policy cannot see).
func (p *Policy) HTTPTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           p.Dialer(30 * time.Second).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}
