package transport

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/sendonce/sendonce/internal/dnsresolve"
)

// resolver returns the configured resolver, or the system's.
func (m *MX) resolver() (*mxResolver, error) {
	addr := m.cfg.Resolver
	if addr == "" {
		var err error
		if addr, err = dnsresolve.SystemAddr(m.cfg.ResolvConf); err != nil {
			return nil, fmt.Errorf("no resolver configured and %w", err)
		}
	}
	return &mxResolver{addr: addr, timeout: m.cfg.DNSTimeout}, nil
}

// mxResolver queries one DNS server (dnsresolve).
type mxResolver struct {
	addr    string
	timeout time.Duration
}

// addresses returns the IPv4 then the IPv6 addresses of host. A host that
// does not exist has none.
func (r *mxResolver) addresses(ctx context.Context, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
		a, err := dnsresolve.Lookup(ctx, r.exchange, host, t)
		if err != nil {
			return nil, err
		}
		out = append(out, a.Addrs()...)
	}
	return out, nil
}

// lookup returns the records of qtype for name, following CNAMEs, and
// whether the name does not exist.
func (r *mxResolver) lookup(ctx context.Context, name string, qtype uint16) ([]dns.RR, bool, error) {
	a, err := dnsresolve.Lookup(ctx, r.exchange, name, qtype)
	if err != nil {
		return nil, false, err
	}
	return a.Records, a.NXDomain, nil
}

// exchange is dnsresolve.Exchange, its errors naming the query and the
// server.
func (r *mxResolver) exchange(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	resp, err := dnsresolve.Exchange(ctx, r.addr, r.timeout, name, qtype)
	if err != nil {
		var rc *dnsresolve.RcodeError
		if !errors.As(err, &rc) && ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", context.Cause(ctx), err)
		}
		return nil, fmt.Errorf("%s %s via %s: %w", dns.TypeToString[qtype], dnsresolve.TrimDot(name), r.addr, err)
	}
	return resp, nil
}
