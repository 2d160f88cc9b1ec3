package delivery

import (
	"regexp"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/transport"
)

// The mx destinations' shaping is kept per process, for every tenant
// together. A tenant's admin sees only the destinations its own sends were
// handed to (which sites another tenant mails is that tenant's business),
// and of a slow-down only its reply code: the remote reply's text is the
// exchanger's words about someone's traffic, not necessarily the viewer's.

// maxTenantSites bounds the destinations remembered per tenant; past it
// the least recently used is forgotten (the shaper forgets idle sites
// too, so a forgotten one is long unused).
const maxTenantSites = 10_000

// tenantSites remembers which tenants' sends this process handed to each
// destination.
type tenantSites struct {
	mu sync.Mutex
	m  map[string]map[string]time.Time // tenant → site → last handed
}

func (ts *tenantSites) note(tenant, site string, now time.Time) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m == nil {
		ts.m = map[string]map[string]time.Time{}
	}
	sites := ts.m[tenant]
	if sites == nil {
		sites = map[string]time.Time{}
		ts.m[tenant] = sites
	}
	if _, ok := sites[site]; !ok && len(sites) >= maxTenantSites {
		var oldest string
		var at time.Time
		for s, t := range sites {
			if oldest == "" || t.Before(at) {
				oldest, at = s, t
			}
		}
		delete(sites, oldest)
	}
	sites[site] = now
}

func (ts *tenantSites) has(tenant, site string) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	_, ok := ts.m[tenant][site]
	return ok
}

// TenantDestinations is Destinations narrowed to the destinations this
// process handed tenant's sends to, each slow-down's reply reduced to its
// codes (GET /v1/admin/destinations, the dashboard's page). The figures
// are the destination's in this process, every tenant's mail together.
func (d *Deliverer) TenantDestinations(tenant string) []transport.SiteStatus {
	out := []transport.SiteStatus{}
	for _, s := range d.mx.Sites() {
		if d.sites.has(tenant, s.Site) {
			s.Why = replyClass(s.Why)
			out = append(out, s)
		}
	}
	return out
}

// replyCodes is the start of an SMTP reply: its code and, when given, its
// enhanced status code.
var replyCodes = regexp.MustCompile(`^[2-5]\d\d(?:[ -][2-5]\.\d{1,3}\.\d{1,3})?`)

// replyClass is what a tenant is shown of a remote reply: its codes, or
// that there was one.
func replyClass(reply string) string {
	if reply == "" {
		return ""
	}
	if c := replyCodes.FindString(reply); c != "" {
		return c
	}
	return "slowed down by the destination's reply"
}
