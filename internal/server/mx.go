package server

// The mx transport's settings and the views of it other parts show.

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/sendonce/sendonce/internal/dashboard"
	"github.com/sendonce/sendonce/internal/dnscheck"
	"github.com/sendonce/sendonce/internal/transport"
)

// dashboardDestinations is the destinations page's view of the mx sites.
func dashboardDestinations(sites []transport.SiteStatus) []dashboard.Destination {
	out := make([]dashboard.Destination, len(sites))
	for i, s := range sites {
		out[i] = dashboard.Destination{Site: s.Site, Rule: s.Rule, Connections: s.Connections, Busy: s.Busy, Limit: s.Limit,
			MaxLimit: s.MaxLimit, Rate: s.Rate, PausedUntil: s.PausedUntil, Why: s.Why, Delivered: s.Delivered,
			Deferred: s.Deferred, Throttled: s.Throttled}
	}
	return out
}

// egressChecks is what the domain checks verify of the mx egress sources:
// each address with the name it says in EHLO.
func egressChecks(mx transport.MXConfig) []dnscheck.Egress {
	out := make([]dnscheck.Egress, 0, len(mx.Sources))
	for _, s := range mx.Sources {
		out = append(out, dnscheck.Egress{Name: s.Name, IP: s.IP, EHLO: cmp.Or(s.EHLO, mx.HELOName, transport.DefaultHELOName)})
	}
	return out
}

// mxConfig is the mx transport's settings: --mx-port, --helo-name,
// --shaping, --egress-source, --egress-pool, --stream-pool,
// --egress-warmup, --dane, --tls-ca; MTA-STS is always on.
func mxConfig(cfg Config, resolver string) (transport.MXConfig, error) {
	c := transport.MXConfig{Resolver: resolver, Port: cfg.MXPort, HELOName: cfg.HELOName, MTASTS: true, STSPort: cfg.MTASTSPort, DANE: cfg.DANE,
		Now: cfg.Now} // the warm-up's days by the process's one clock
	if cfg.HELOName != "" && !transport.ValidHELOName(cfg.HELOName) {
		return c, fmt.Errorf("--helo-name %q: not a host name", cfg.HELOName)
	}
	if cfg.Shaping != "" {
		sh, err := transport.LoadShaping(cfg.Shaping)
		if err != nil {
			return c, fmt.Errorf("--shaping: %w", err)
		}
		c.Shaping = sh
	}
	for _, v := range cfg.EgressSources {
		src, err := transport.ParseSource(v)
		if err != nil {
			return c, fmt.Errorf("--egress-source: %w", err)
		}
		if slices.ContainsFunc(c.Sources, func(o transport.Source) bool { return o.Name == src.Name }) {
			return c, fmt.Errorf("--egress-source: %s given twice", src.Name)
		}
		c.Sources = append(c.Sources, src)
	}
	if err := egressPools(cfg, &c); err != nil {
		return c, err
	}
	if cfg.TLSCA != "" {
		pool, err := caPool(cfg.TLSCA)
		if err != nil {
			return c, err
		}
		c.RootCAs = pool
	}
	return c, nil
}
