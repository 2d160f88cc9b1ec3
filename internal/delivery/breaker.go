package delivery

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sendonce/sendonce/internal/transport"
)

// A circuit breaker per transport of a failover chain: after BreakerTrips
// definite failures in a row a transport is passed over, for BreakerCoolDown,
// by attempts that have another transport after it; then one attempt tries
// it again (half-open): its success closes the breaker, a definite failure
// opens it for another cool-down. Passing a transport over is always safe:
// it is handed nothing. A send pinned to one transport, and a chain's last
// transport, are always tried.

// Defaults of the breaker.
const (
	BreakerTrips    = 5
	BreakerCoolDown = 30 * time.Second
)

type breaker struct {
	fails    int
	openTill time.Time
	probing  bool // half-open: one attempt is trying it
}

// breakers are the chain's breakers and its metrics.
type breakers struct {
	mu       sync.Mutex
	m        map[string]*breaker
	attempts *prometheus.CounterVec
	open     *prometheus.GaugeVec
}

// registerBreakers adds sendonce_transport_attempts_total{transport,class}
// and sendonce_transport_breaker_open{transport} to reg (nil: none).
func (b *breakers) register(reg *prometheus.Registry) {
	b.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sendonce_transport_attempts_total",
		Help: "Handoffs to each transport of a provider or failover chain, by outcome class: accepted, definite, maybe_accepted, ambiguous, skipped."},
		[]string{"transport", "class"})
	b.open = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sendonce_transport_breaker_open",
		Help: "1 while a transport's circuit breaker is open (it is passed over), 0 otherwise."}, []string{"transport"})
	if reg != nil {
		reg.MustRegister(b.attempts, b.open)
	}
}

// allow reports whether the transport is to be tried now.
func (b *breakers) allow(name string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	br := b.m[name]
	if br == nil || br.fails < BreakerTrips {
		return true
	}
	if now.Before(br.openTill) || br.probing {
		return false
	}
	br.probing = true
	return true
}

// done records the outcome of a handoff to the transport.
func (b *breakers) done(name string, err error, now time.Time) {
	class := "accepted"
	switch {
	case err == nil:
	case transport.Definite(err):
		class = "definite"
	case transport.ClassOf(err) == transport.Temporary:
		class = "maybe_accepted"
	default:
		class = "ambiguous"
	}
	b.count(name, class)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]*breaker{}
	}
	br := b.m[name]
	if br == nil {
		br = &breaker{}
		b.m[name] = br
	}
	br.probing = false
	if class != "definite" {
		br.fails = 0
		b.gauge(name, 0)
		return
	}
	br.fails++
	if br.fails >= BreakerTrips {
		br.openTill = now.Add(BreakerCoolDown)
		b.gauge(name, 1)
	}
}

func (b *breakers) count(name, class string) {
	if b.attempts != nil {
		b.attempts.WithLabelValues(name, class).Inc()
	}
}

func (b *breakers) gauge(name string, v float64) {
	if b.open != nil {
		b.open.WithLabelValues(name).Set(v)
	}
}

// release ends a half-open try that handed nothing over (no free session).
func (b *breakers) release(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if br := b.m[name]; br != nil {
		br.probing = false
	}
}
