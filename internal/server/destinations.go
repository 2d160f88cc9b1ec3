package server

import (
	"github.com/sendonce/sendonce/internal/dashboard"
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
