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
	Why                                string // what lowered the limits last
	Delivered, Deferred, Throttled     int
}

// destinations shows the shaping state of every destination this process
// delivered to (admin: it describes the server, not a tenant's data).
func (d *Dashboard) destinations(q *req) error {
	var list []Destination
	if d.cfg.Destinations != nil {
		list = d.cfg.Destinations()
	}
	return d.render(q, 0, "destinations", "Destinations", list)
}
