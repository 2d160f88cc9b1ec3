package dashboard

import "time"

// Destination is one mx destination's traffic shaping in this process, as
// the destinations page shows it (GET /v1/admin/destinations has the same
// figures).
type Destination struct {
	Site, Rule string
	// Connections open, Busy of them carrying a message, Limit in force
	// now (lowered by slow-down replies) of at most MaxLimit.
	Connections, Busy, Limit, MaxLimit int
	Rate                               float64 // messages per second allowed now
	PausedUntil                        time.Time
	Why                                string // the codes of the reply that lowered the limits last
	Delivered, Deferred, Throttled     int
}

// destinations shows the shaping state of the destinations this process
// delivered the tenant's sends to (admin).
func (d *Dashboard) destinations(q *req) error {
	var list []Destination
	if d.cfg.Destinations != nil {
		list = d.cfg.Destinations(q.key.Tenant)
	}
	return d.render(q, 0, "destinations", "Destinations", list)
}
