package transport

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// The shaper keeps, per destination (site), the limits in force, the
// connections open, the idle sessions kept for the next message, the
// message rate and the adaptive state a slow-down reply changes. It is
// this process's own: several workers sharing a database each shape
// their own share (docs/deliverability.md).

// shaper holds every destination's state.
type shaper struct {
	cfg *Shaping
	now func() time.Time

	mu    sync.Mutex
	sites map[string]*site
	calls int // site calls since the last sweep
}

// Forgetting destinations: a site untouched this long, with nothing open
// and its limits back to the file's, is dropped (looked for every
// sweepEvery site calls), so that a long-running process does not keep
// every domain it ever mailed.
const (
	siteTTL    = time.Hour
	sweepEvery = 4096
)

func newShaper(cfg *Shaping) *shaper {
	if cfg == nil {
		cfg = DefaultShaping()
	}
	return &shaper{cfg: cfg, now: time.Now, sites: map[string]*site{}}
}

// site returns the state of a destination, made with limits the first
// time.
func (sh *shaper) site(key string, limits Limits, rule string) *site {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := sh.now()
	if sh.calls++; sh.calls >= sweepEvery {
		sh.calls = 0
		for k, s := range sh.sites {
			if s.idleSince(now, siteTTL) {
				delete(sh.sites, k)
			}
		}
	}
	s, ok := sh.sites[key]
	if ok {
		s.mu.Lock()
		s.used = now
		s.mu.Unlock()
	}
	if !ok {
		s = &site{key: key, rule: rule, limits: limits, conns: limits.MaxConnections, rate: limits.MaxMessagesPerSecond,
			avg: 200 * time.Millisecond, now: sh.now, used: now}
		sh.sites[key] = s
	}
	return s
}

// site is one destination's shaping state.
type site struct {
	key    string
	rule   string
	limits Limits
	now    func() time.Time

	mu      sync.Mutex
	conns   int     // the connection limit in force (≤ limits.MaxConnections)
	rate    float64 // the rate in force, messages a second; 0: none
	open    int     // connections open or opening (busy and idle), until their QUIT is done
	busy    int     // connections carrying a message now
	idle    []*pooled
	paused  time.Time // no new message before this
	why     string    // why the limits are lowered ("" when they are not)
	tokens  float64   // rate bucket
	filled  time.Time
	next    time.Time     // the virtual queue: when the next waiting message may expect a turn
	avg     time.Duration // moving average of one message's handover
	clean   int           // clean deliveries since the last change
	changed time.Time     // last change of the limits
	used    time.Time     // last handed out (shaper.site)
	// counters for operators
	delivered, deferred, throttled int
}

// idleSince reports whether the site may be forgotten: nothing open, its
// limits the file's, unused for ttl.
func (s *site) idleSince(now time.Time, ttl time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open == 0 && s.why == "" && now.After(s.paused) && now.Sub(s.used) > ttl
}

// lease is the right to carry one message: an idle session, or room for
// a new connection (session nil).
type lease struct {
	s       *site
	session *pooled
}

// acquire takes a connection for one message now, or says when to come
// back. Only idle sessions fits accepts are taken (nil accepts any): the
// message may need verified TLS, or a source of its stream's pool.
func (s *site) acquire(fits func(*pooled) bool) (*lease, time.Time, string) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Before(s.paused) {
		s.deferred++
		return nil, s.queue(now, s.paused), "paused: " + s.why
	}
	if s.rate > 0 {
		s.refill(now)
		if s.tokens < 1 {
			s.deferred++
			wait := time.Duration((1 - s.tokens) / s.rate * float64(time.Second))
			return nil, s.queue(now, now.Add(wait)), fmt.Sprintf("rate limit of %.3g messages a second", s.rate)
		}
	}
	for i := len(s.idle) - 1; i >= 0; i-- {
		p := s.idle[i]
		if fits != nil && !fits(p) {
			continue
		}
		s.idle = slices.Delete(s.idle, i, i+1)
		p.timer.Stop()
		s.take(now)
		return &lease{s: s, session: p}, time.Time{}, ""
	}
	if s.open >= s.conns && len(s.idle) > 0 {
		// Only idle sessions that do not fit (TLS not verified, another
		// pool's source): make room for the next message.
		p := s.idle[0]
		s.idle = s.idle[1:]
		p.timer.Stop()
		go s.closed(p)
	}
	if s.open < s.conns {
		s.open++
		s.take(now)
		return &lease{s: s}, time.Time{}, ""
	}
	s.deferred++
	return nil, s.queue(now, now), fmt.Sprintf("all %d connections in use", s.conns)
}

func (s *site) take(now time.Time) {
	s.busy++
	if s.rate > 0 {
		s.tokens--
	}
}

func (s *site) refill(now time.Time) {
	if s.filled.IsZero() {
		s.tokens, s.filled = 1, now
		return
	}
	s.tokens = min(s.tokens+now.Sub(s.filled).Seconds()*s.rate, max(1, s.rate))
	s.filled = now
}

// queue gives a message that must wait its place after from in the
// destination's virtual queue: messages turned away are spread over the
// time the destination needs for them, at the pace it takes messages,
// instead of all coming back at once.
func (s *site) queue(now, from time.Time) time.Time {
	step := s.avg / time.Duration(max(s.conns, 1))
	if s.rate > 0 {
		step = max(step, time.Duration(float64(time.Second)/s.rate))
	}
	step = max(step, time.Millisecond)
	if s.next.Before(from) {
		s.next = from
	}
	s.next = s.next.Add(step)
	return s.next
}

// done ends a lease: p is the session to keep for the next message (nil
// when the connection was closed). ok reports a clean delivery, took how
// long it took.
//
// It reports whether this delivery brought the destination back to its
// full limits after a slow-down (the resumed half of throttled).
func (l *lease) done(p *pooled, ok bool, took time.Duration) (resumed bool) {
	s := l.s
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy--
	if ok {
		s.delivered++
		s.avg = (s.avg*7 + took) / 8
		s.clean++
		if s.why != "" && s.clean >= s.limits.RecoverAfter && now.Sub(s.changed) >= time.Duration(s.limits.RecoverInterval) {
			s.recover(now)
			resumed = s.why == ""
		}
	}
	if p == nil {
		s.open-- // closed already
		return resumed
	}
	if p.msgs >= s.limits.MaxMessagesPerConnection || s.open > s.conns {
		go s.closed(p)
		return resumed
	}
	p.timer = time.AfterFunc(time.Duration(s.limits.IdleTimeout), func() { s.expire(p) })
	s.idle = append(s.idle, p)
	return resumed
}

// expire closes an idle session nobody took in time.
func (s *site) expire(p *pooled) {
	s.mu.Lock()
	i := slices.Index(s.idle, p)
	if i < 0 {
		s.mu.Unlock()
		return
	}
	s.idle = slices.Delete(s.idle, i, i+1)
	s.mu.Unlock()
	s.closed(p)
}

// closed says QUIT on a session and only then stops counting it: until
// the server has seen it go, it holds one of the server's connections.
func (s *site) closed(p *pooled) {
	p.quit()
	s.mu.Lock()
	s.open--
	s.mu.Unlock()
}

// recover raises the lowered limits one step.
func (s *site) recover(now time.Time) {
	s.clean, s.changed = 0, now
	if s.conns < s.limits.MaxConnections {
		s.conns++
	}
	if s.limits.MaxMessagesPerSecond > 0 {
		s.rate = min(s.rate*2, s.limits.MaxMessagesPerSecond)
	} else if s.rate > 0 {
		s.rate *= 2
		if s.rate > 1000 {
			s.rate = 0 // back to no bound
		}
	}
	if s.conns >= s.limits.MaxConnections && s.rate == s.limits.MaxMessagesPerSecond {
		s.why = ""
	}
}

// slowDown applies a slow-down rule after reply; it returns when the
// destination takes the message again.
func (s *site) slowDown(r *SlowDownRule, reply string) time.Time {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttled++
	s.clean, s.changed = 0, now
	s.why = reply
	switch r.Action {
	case SlowConnections:
		// The others open (the refused one is still counted) are what
		// the server takes.
		s.conns = max(1, min(s.conns-1, s.open-1))
	case SlowRate:
		s.conns = max(1, s.conns/2)
		if s.rate > 0 {
			s.rate = max(s.rate/2, 1.0/60)
		} else {
			// No rate was set: start from the pace just seen.
			s.rate = max(float64(s.conns)/max(s.avg.Seconds(), 0.001)/2, 1.0/60)
		}
		s.tokens = 0
		s.paused = now.Add(time.Duration(r.For))
	case SlowPause:
		s.paused = now.Add(time.Duration(r.For))
	}
	from := now
	if s.paused.After(now) {
		from = s.paused
	}
	return s.queue(now, from)
}

// SiteStatus is one destination's shaping state (operators, tests).
type SiteStatus struct {
	Site        string    `json:"site"`
	Rule        string    `json:"rule"`
	Connections int       `json:"connections"`
	Busy        int       `json:"busy"`
	Limit       int       `json:"connection_limit"`
	MaxLimit    int       `json:"max_connections"`
	Rate        float64   `json:"rate_limit"`
	PausedUntil time.Time `json:"paused_until,omitzero"`
	Why         string    `json:"why,omitempty"`
	Delivered   int       `json:"delivered"`
	Deferred    int       `json:"deferred"`
	Throttled   int       `json:"throttled"`
}

// snapshot is the shaper's sites as they are now, read under its lock
// and walked after it, each site then locked on its own.
func (sh *shaper) snapshot() []*site {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sites := make([]*site, 0, len(sh.sites))
	for _, s := range sh.sites {
		sites = append(sites, s)
	}
	return sites
}

func (sh *shaper) status() []SiteStatus {
	sites := sh.snapshot()
	out := make([]SiteStatus, 0, len(sites))
	for _, s := range sites {
		s.mu.Lock()
		st := SiteStatus{Site: s.key, Rule: s.rule, Connections: s.open, Busy: s.busy, Limit: s.conns, MaxLimit: s.limits.MaxConnections,
			Rate: s.rate, Why: s.why, Delivered: s.delivered, Deferred: s.deferred, Throttled: s.throttled}
		if s.now().Before(s.paused) {
			st.PausedUntil = s.paused
		}
		s.mu.Unlock()
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b SiteStatus) int { return compareStrings(a.Site, b.Site) })
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// close ends every idle session.
func (sh *shaper) close() {
	sites := sh.snapshot()
	for _, s := range sites {
		s.mu.Lock()
		idle := s.idle
		s.idle = nil
		s.mu.Unlock()
		for _, p := range idle {
			p.timer.Stop()
			s.closed(p)
		}
	}
}
