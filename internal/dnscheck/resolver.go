package dnscheck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/sendonce/sendonce/internal/dnsresolve"
)

// maxQueries bounds the DNS queries of one check: SPF includes of
// includes cannot make it run away.
const maxQueries = 150

// errResolverDown is wrapped by every query after one failed on the
// network.
var errResolverDown = errors.New("resolver unreachable")

// answer is the outcome of one lookup that the resolver answered.
type answer = dnsresolve.Answer

type question struct {
	name  string
	qtype uint16
}

// resolver queries one server (dnsresolve), caching answers for the life
// of one check, counting its queries, and giving up on the server after
// one network failure. It is not safe for concurrent use.
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

// lookup is dnsresolve.Lookup through this check's cache and bounds.
func (r *resolver) lookup(ctx context.Context, name string, qtype uint16) (*answer, error) {
	q := question{strings.ToLower(dns.Fqdn(name)), qtype}
	if a, ok := r.cache[q]; ok {
		return a, nil
	}
	a, err := dnsresolve.Lookup(ctx, r.exchange, name, qtype)
	if err != nil {
		return nil, err
	}
	r.cache[q] = a
	return a, nil
}

// exchange is one counted query; after a network failure every query
// fails at once with errResolverDown.
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
	resp, err := dnsresolve.Exchange(ctx, r.addr, r.timeout, name, qtype)
	var rc *dnsresolve.RcodeError
	switch {
	case err == nil:
		return resp, nil
	case errors.As(err, &rc):
		return nil, fmt.Errorf("%s: %w", desc, err)
	case ctx.Err() == nil:
		r.down = fmt.Errorf("%w: %s: %w", errResolverDown, r.addr, err)
		return nil, fmt.Errorf("%s: %w", desc, r.down)
	}
	return nil, fmt.Errorf("%s: %w", desc, context.Cause(ctx))
}

func trimDot(s string) string { return dnsresolve.TrimDot(s) }
