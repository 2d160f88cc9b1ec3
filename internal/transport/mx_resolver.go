package transport

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
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
	return &mxResolver{addr: addr, timeout: m.cfg.DNSTimeout, cache: m.dns}, nil
}

// mxResolver queries one DNS server (dnsresolve).
type mxResolver struct {
	addr    string
	timeout time.Duration
	cache   *dnsCache // nil: none
}

// dnsCache keeps answers for their TTL (at most dnsCacheMax; a name that
// does not exist or has no such records for dnsCacheNegative), as a
// resolver would, so that a backlog to one domain does not ask the same
// questions for every message. Failures are not kept.
type dnsCache struct {
	mu  sync.Mutex
	m   map[dnsKey]dnsEntry
	now func() time.Time
}

type dnsKey struct {
	name  string
	qtype uint16
}

type dnsEntry struct {
	a       *dnsresolve.Answer
	expires time.Time
}

const (
	dnsCacheMax      = 5 * time.Minute
	dnsCacheNegative = 30 * time.Second
	dnsCacheEntries  = 20000
)

func newDNSCache() *dnsCache {
	return &dnsCache{m: map[dnsKey]dnsEntry{}, now: time.Now}
}

// resolve is dnsresolve.Lookup through the cache.
func (r *mxResolver) resolve(ctx context.Context, name string, qtype uint16) (*dnsresolve.Answer, error) {
	c := r.cache
	if c == nil {
		return dnsresolve.Lookup(ctx, r.exchange, name, qtype)
	}
	key := dnsKey{strings.ToLower(name), qtype}
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.a, nil
	}
	a, err := dnsresolve.Lookup(ctx, r.exchange, name, qtype)
	if err != nil {
		return nil, err
	}
	ttl := dnsCacheNegative
	if len(a.Records) > 0 {
		ttl = dnsCacheMax
		for _, rr := range a.Records {
			ttl = min(ttl, time.Duration(rr.Header().Ttl)*time.Second)
		}
	}
	if ttl > 0 {
		c.mu.Lock()
		if len(c.m) >= dnsCacheEntries {
			for k, old := range c.m {
				if now.After(old.expires) {
					delete(c.m, k)
				}
			}
			if len(c.m) >= dnsCacheEntries {
				clear(c.m)
			}
		}
		c.m[key] = dnsEntry{a: a, expires: now.Add(ttl)}
		c.mu.Unlock()
	}
	return a, nil
}

// addresses returns the IPv4 then the IPv6 addresses of host. A host that
// does not exist has none.
func (r *mxResolver) addresses(ctx context.Context, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
		a, err := r.resolve(ctx, host, t)
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
	a, err := r.resolve(ctx, name, qtype)
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
