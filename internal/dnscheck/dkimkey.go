package dnscheck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sendonce/sendonce/internal/dnsresolve"
)

// CheckDKIMKey runs the DKIM check alone, of opts.Selector (required) at
// opts.Domain: what a key rotation asks before signing moves to a new
// selector (is its record published, and is it the new key?). Only
// Domain, Selector, Resolver, ResolvConf, ExpectedDKIMKey and the
// timeouts are read. Like Check, DNS failures are error findings; an
// error means invalid options or a done ctx.
func CheckDKIMKey(ctx context.Context, opts Options) (*Report, error) {
	domain, err := normalizeDomain(opts.Domain)
	if err != nil {
		return nil, err
	}
	selector := strings.ToLower(strings.TrimSpace(opts.Selector))
	if selector == "" || !validName(selector) {
		return nil, fmt.Errorf("dnscheck: invalid selector %q", opts.Selector)
	}
	addr, err := resolverOf(opts)
	if err != nil {
		return nil, err
	}
	timeout, qt := cmpOr(opts.Timeout, DefaultTimeout), cmpOr(opts.QueryTimeout, DefaultQueryTimeout)
	cctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("the check took longer than %v", timeout))
	defer cancel()
	c := &checker{ctx: cctx, opts: opts, domain: domain, selector: selector, envDomain: domain,
		r:   newResolver(addr, qt),
		rep: &Report{Domain: domain, Selector: selector, Resolver: addr, Findings: []Finding{}}}
	c.checkDKIM()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.rep, nil
}

// resolverOf is the server Check queries for opts, "host:port".
func resolverOf(opts Options) (string, error) {
	if opts.Resolver != "" {
		addr, err := dnsresolve.ParseAddr(opts.Resolver)
		if err != nil {
			return "", fmt.Errorf("dnscheck: %w", err)
		}
		return addr, nil
	}
	conf := opts.ResolvConf
	if conf == "" {
		conf = DefaultResolvConf
	}
	addr, err := dnsresolve.SystemAddr(conf)
	if err != nil {
		return "", errors.Join(errors.New("dnscheck: no resolver given"), err)
	}
	return addr, nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
