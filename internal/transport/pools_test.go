package transport

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

// ParsePool reads NAME=SOURCE[:WEIGHT],… and refuses what is not that;
// CheckEgress refuses pools, stream pools and warm-ups naming nothing.
func TestParsePool_AndCheckEgress(t *testing.T) {
	p, err := ParsePool("bulk=b1:3,b2")
	if err != nil || p.Name != "bulk" || len(p.Members) != 2 || p.Members[0] != (PoolMember{"b1", 3}) || p.Members[1] != (PoolMember{"b2", 1}) {
		t.Fatalf("ParsePool = %+v, %v", p, err)
	}
	for _, bad := range []string{"bulk", "=b1", "bulk=", "bulk=b1:0", "bulk=b1:x", "bulk=b1,b1", "bulk=b1:1001"} {
		if _, err := ParsePool(bad); err == nil {
			t.Errorf("ParsePool(%q) accepted", bad)
		}
	}
	if _, _, err := ParseStreamPool("urgent=p"); err == nil {
		t.Errorf("ParseStreamPool accepted the stream urgent")
	}
	if _, _, err := ParseWarmup("b1=2026-13-01"); err == nil {
		t.Errorf("ParseWarmup accepted month 13")
	}
	srcs := []Source{{Name: "b1", IP: netip.MustParseAddr("192.0.2.1")}}
	for _, c := range []struct {
		cfg  MXConfig
		want string
	}{
		{MXConfig{Sources: srcs, Pools: []Pool{{Name: "p", Members: []PoolMember{{"b2", 1}}}}}, "b2"},
		{MXConfig{Sources: srcs, StreamPools: map[string]string{"bulk": "nope"}}, "nope"},
		{MXConfig{Sources: srcs, Warmup: map[string]time.Time{"b3": {}}}, "b3"},
	} {
		if err := c.cfg.CheckEgress(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckEgress = %v, want an error naming %s", err, c.want)
		}
	}
}

// A pool's sources take turns in proportion to their weights, spread
// out; a source at its warm-up cap gives its turn to the next.
func TestEgress_WeightsAndWarmupOverflow(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	cfg := MXConfig{
		Sources: []Source{{Name: "a"}, {Name: "b"}},
		Pools:   []Pool{{Name: "p", Members: []PoolMember{{"a", 3}, {"b", 1}}}}, StreamPools: map[string]string{"bulk": "p"},
		Warmup: map[string]time.Time{"a": now.Truncate(24 * time.Hour)}, WarmupSchedule: []int{5},
		Now: func() time.Time { return now },
	}
	e := newEgress(cfg)
	var got []string
	for range 8 {
		src, ok, _ := e.pick("bulk", "gmail")
		if !ok {
			t.Fatal("no source had room")
		}
		got = append(got, src.Name)
	}
	// a's weighted turns are 6 of 8; its cap of 5 gives the sixth to b.
	if strings.Count(strings.Join(got, ""), "a") != 5 {
		t.Errorf("picks %v: a sent more or less than its day-1 cap of 5", got)
	}
	// Another destination has its own count.
	if src, ok, _ := e.pick("bulk", "microsoft"); !ok || src.Name != "a" && src.Name != "b" {
		t.Errorf("another site: %v, %v", src, ok)
	}
	// Warm from the day after the schedule's last.
	now = now.Add(24 * time.Hour)
	n := 0
	for range 40 {
		if src, _, _ := e.pick("bulk", "gmail"); src.Name == "a" {
			n++
		}
	}
	if n != 30 {
		t.Errorf("warm, a took %d of 40 picks, want its weight's 30", n)
	}
}
