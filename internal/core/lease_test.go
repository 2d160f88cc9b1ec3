package core_test

import (
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

func TestLease_GrowsWithTheSizeUpToItsCap(t *testing.T) {
	l := core.Lease{Base: 30 * time.Second, PerMiB: 2 * time.Second, MaxGrowth: 10 * time.Minute}
	const mib = 1 << 20
	for _, c := range []struct {
		name  string
		lease core.Lease
		size  int64
		want  time.Duration
	}{
		{"no bytes to hand over", l, 0, 30 * time.Second},
		{"a small file", l, 64 << 10, 30*time.Second + 125*time.Millisecond},
		{"one MiB", l, mib, 32 * time.Second},
		{"a 14 MB handoff", l, 14_000_000, 30*time.Second + 26_702_880_859*time.Nanosecond},
		{"40 MiB, the largest message", l, 40 * mib, 110 * time.Second},
		{"past the cap", l, 1000 * mib, 30*time.Second + 10*time.Minute},
		{"a size that would overflow", l, 1 << 62, 30*time.Second + 10*time.Minute},
		{"no growth configured", core.Lease{Base: time.Second}, 40 * mib, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.lease.For(c.size); got != c.want {
				t.Errorf("For(%d) = %v, want %v", c.size, got, c.want)
			}
		})
	}
}
