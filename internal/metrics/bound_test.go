package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The bound counters are the vectors' own: what they count is what a
// scrape reads under each label, for codes and vias inside and outside
// the bound sets.
func TestBoundCounters_CountUnderTheirLabels(t *testing.T) {
	m := New(nil)
	for range 3 {
		m.HTTPRequest(200)
	}
	m.HTTPRequest(409)
	m.HTTPRequest(999)
	m.DuplicatePrevented(ViaReplay)
	m.DuplicatePrevented(ViaReplay)
	m.DuplicatePrevented("other")
	m.IdempotencyConflict("in_use")
	m.IdempotencyConflict("odd")
	for _, c := range []struct {
		got  float64
		want float64
		what string
	}{
		{testutil.ToFloat64(m.HTTPRequests.WithLabelValues("200")), 3, "code 200"},
		{testutil.ToFloat64(m.HTTPRequests.WithLabelValues("409")), 1, "code 409"},
		{testutil.ToFloat64(m.HTTPRequests.WithLabelValues("999")), 1, "code 999"},
		{testutil.ToFloat64(m.DuplicatesPrevented.WithLabelValues(ViaReplay)), 2, "via replay"},
		{testutil.ToFloat64(m.DuplicatesPrevented.WithLabelValues("other")), 1, "via other"},
		{testutil.ToFloat64(m.IdempotencyConflicts.WithLabelValues("in_use")), 1, "in_use"},
		{testutil.ToFloat64(m.IdempotencyConflicts.WithLabelValues("odd")), 1, "odd"},
		{testutil.ToFloat64(m.IdempotencyConflicts.WithLabelValues("reused")), 0, "reused"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
}
