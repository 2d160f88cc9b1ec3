package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// statusCounters are HTTPRequests' counters by status code, each looked up
// in the vector once: WithLabelValues hashes its labels and takes the
// vector's lock on every call, a measurable share of a replay answered in
// microseconds.
type statusCounters struct {
	byCode [600]atomic.Pointer[prometheus.Counter]
}

// HTTPRequest counts one HTTP answer with status code.
func (m *Metrics) HTTPRequest(code int) {
	if code < 0 || code >= len(m.status.byCode) {
		m.HTTPRequests.WithLabelValues(strconv.Itoa(code)).Inc()
		return
	}
	p := m.status.byCode[code].Load()
	if p == nil {
		c := m.HTTPRequests.WithLabelValues(strconv.Itoa(code))
		p = &c
		m.status.byCode[code].Store(p)
	}
	(*p).Inc()
}

// boundVias are DuplicatesPrevented's and IdempotencyConflicts' counters
// by label, looked up once.
type boundVias struct {
	once      sync.Once
	dup       map[string]prometheus.Counter
	conflicts map[string]prometheus.Counter
}

func (m *Metrics) bound() *boundVias {
	m.vias.once.Do(func() {
		m.vias.dup = map[string]prometheus.Counter{}
		for _, v := range DuplicateVias {
			m.vias.dup[v] = m.DuplicatesPrevented.WithLabelValues(v)
		}
		m.vias.conflicts = map[string]prometheus.Counter{}
		for _, r := range []string{"in_use", "reused"} {
			m.vias.conflicts[r] = m.IdempotencyConflicts.WithLabelValues(r)
		}
	})
	return &m.vias
}

// DuplicatePrevented counts a repeated send that sent nothing new, caught
// as via says (one of DuplicateVias).
func (m *Metrics) DuplicatePrevented(via string) {
	if c, ok := m.bound().dup[via]; ok {
		c.Inc()
		return
	}
	m.DuplicatesPrevented.WithLabelValues(via).Inc()
}

// IdempotencyConflict counts a request refused for its key: reason in_use
// or reused.
func (m *Metrics) IdempotencyConflict(reason string) {
	if c, ok := m.bound().conflicts[reason]; ok {
		c.Inc()
		return
	}
	m.IdempotencyConflicts.WithLabelValues(reason).Inc()
}
