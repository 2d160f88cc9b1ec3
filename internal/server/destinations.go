package server

import (
	"cmp"

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
