package delivery

import (
	"errors"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/transport"
)

// Bounds of the relay pool map. Tenants create relays through the API (a
// mailbox's smtp:// URL), each with up to DefaultRelaySessions idle
// sessions, so the map must not only grow.
const (
	// MaxRelays bounds the relay transports kept; past it the least
	// recently used tenant relay is closed.
	MaxRelays = 256
	// RelayIdleTTL closes a tenant relay unused this long.
	RelayIdleTTL = 10 * time.Minute
)

// relay is one relay transport and when it was last handed out.
type relay struct {
	t       *transport.SMTP
	used    time.Time
	trusted bool // the operator's --transport: never evicted
}

// relays keeps one pooled transport per relay URL.
type relays struct {
	mu  sync.Mutex
	m   map[string]*relay // by URL; tenant relays under "tenant\x00"+URL
	now func() time.Time  // the machine's clock: idle time is real time
}

// smtpTransport returns the relay transport of url. A relay a tenant set on
// a mailbox (tenant true) dials through the outbound policy; the
// operator's --transport is trusted. The two never share a pool, even for
// the same URL.
func (d *Deliverer) smtpTransport(url string, tenant bool) (transport.Transport, error) {
	rs := &d.relays
	now := rs.now()
	key := url
	if tenant {
		key = "tenant\x00" + url
	}
	rs.mu.Lock()
	if r, ok := rs.m[key]; ok {
		r.used = now
		rs.mu.Unlock()
		return r.t, nil
	}
	rs.mu.Unlock()

	if err := ValidateTransport(url); err != nil {
		return nil, err
	}
	cfg, err := transport.ParseSMTPURL(url)
	if err != nil {
		return nil, err
	}
	// Relays are long-lived: keep their sessions for the next message,
	// as many as may be open at once.
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = DefaultRelaySessions
	}
	cfg.MaxIdle = cfg.MaxSessions
	if tenant {
		cfg.DialContext = d.svc.Outbound().DialContext
	}

	rs.mu.Lock()
	if r, ok := rs.m[key]; ok { // another attempt made it meanwhile
		r.used = now
		rs.mu.Unlock()
		return r.t, nil
	}
	evicted := rs.evict(now)
	r := &relay{t: transport.NewSMTP(cfg), used: now, trusted: !tenant}
	rs.m[key] = r
	rs.mu.Unlock()
	// Closing says QUIT to idle sessions: not under the lock, and not on
	// this attempt's time. An attempt still using an evicted transport
	// finishes; Close only stops it from pooling again.
	if len(evicted) > 0 {
		go func() {
			for _, t := range evicted {
				_ = t.Close()
			}
		}()
	}
	return r.t, nil
}

// evict removes tenant relays idle past RelayIdleTTL and, if the map is
// still full, the least recently used one. It returns them for closing.
func (rs *relays) evict(now time.Time) []*transport.SMTP {
	var out []*transport.SMTP
	var lruKey string
	var lru *relay
	for k, r := range rs.m {
		if r.trusted {
			continue
		}
		if now.Sub(r.used) >= RelayIdleTTL {
			out = append(out, r.t)
			delete(rs.m, k)
			continue
		}
		if lru == nil || r.used.Before(lru.used) {
			lruKey, lru = k, r
		}
	}
	if len(rs.m) >= MaxRelays && lru != nil {
		out = append(out, lru.t)
		delete(rs.m, lruKey)
	}
	return out
}

// relayCount is how many relay transports are kept (tests).
func (d *Deliverer) relayCount() int {
	d.relays.mu.Lock()
	defer d.relays.mu.Unlock()
	return len(d.relays.m)
}

// Close ends the relays' idle sessions. Call it after the workers stopped.
func (d *Deliverer) Close() error {
	rs := &d.relays
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var errs []error
	if d.mx != nil {
		errs = append(errs, d.mx.Close())
	}
	for k, r := range rs.m {
		errs = append(errs, r.t.Close())
		delete(rs.m, k)
	}
	return errors.Join(errs...)
}
