package transport

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Egress pools (docs/deliverability.md, "Egress pools and warm-up"): an
// operator groups the egress sources into named pools with weights and
// gives a stream its own pool, so that bulk mail leaves from addresses
// whose reputation is its own and transactional mail keeps the others.
// Each source may be warming up: a new address sends a shipped daily
// number of messages per destination, and what goes beyond it overflows
// to another source of the pool or waits for the next day.

// PoolMember is one source of a pool and its share of the pool's mail.
type PoolMember struct {
	Source string
	Weight int
}

// Pool is a named group of egress sources (--egress-pool).
type Pool struct {
	Name    string
	Members []PoolMember
}

// maxPoolWeight bounds a member's weight: shares are relative, and a
// bound keeps the weighted turn's counters small.
const maxPoolWeight = 1000

// ParsePool reads an --egress-pool value: NAME=SOURCE[:WEIGHT],… (weight
// 1 when left out).
func ParsePool(s string) (Pool, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" || strings.ContainsAny(name, ",: ") || rest == "" {
		return Pool{}, fmt.Errorf("egress pool %q: want NAME=SOURCE[:WEIGHT],SOURCE[:WEIGHT]…", s)
	}
	p := Pool{Name: name}
	for _, m := range strings.Split(rest, ",") {
		src, w, hasW := strings.Cut(m, ":")
		weight := 1
		if hasW {
			n, err := strconv.Atoi(w)
			if err != nil || n < 1 || n > maxPoolWeight {
				return Pool{}, fmt.Errorf("egress pool %q: weight %q of %q is not a whole number from 1 to %d", s, w, src, maxPoolWeight)
			}
			weight = n
		}
		if src == "" || slices.ContainsFunc(p.Members, func(pm PoolMember) bool { return pm.Source == src }) {
			return Pool{}, fmt.Errorf("egress pool %q: empty or repeated source %q", s, src)
		}
		p.Members = append(p.Members, PoolMember{Source: src, Weight: weight})
	}
	return p, nil
}

// ParseStreamPool reads a --stream-pool value: STREAM=POOL.
func ParseStreamPool(s string) (stream, pool string, err error) {
	stream, pool, ok := strings.Cut(s, "=")
	if !ok || stream != "transactional" && stream != "bulk" || pool == "" {
		return "", "", fmt.Errorf("stream pool %q: want STREAM=POOL, STREAM transactional or bulk", s)
	}
	return stream, pool, nil
}

// ParseWarmup reads an --egress-warmup value: SOURCE=YYYY-MM-DD, the first
// day the source sends (day 1 of WarmupSchedule), in UTC.
func ParseWarmup(s string) (source string, start time.Time, err error) {
	source, day, ok := strings.Cut(s, "=")
	if ok && source != "" {
		start, err = time.Parse(time.DateOnly, day)
	}
	if !ok || source == "" || err != nil {
		return "", time.Time{}, fmt.Errorf("egress warm-up %q: want SOURCE=YYYY-MM-DD (the day the source began sending)", s)
	}
	return source, start, nil
}

// CheckEgress reports a configuration whose pools, stream pools or
// warm-ups name a source or pool that does not exist.
func (c MXConfig) CheckEgress() error {
	known := func(src string) bool {
		return slices.ContainsFunc(c.Sources, func(s Source) bool { return s.Name == src })
	}
	for i, p := range c.Pools {
		if slices.ContainsFunc(c.Pools[:i], func(q Pool) bool { return q.Name == p.Name }) {
			return fmt.Errorf("--egress-pool %s is given twice", p.Name)
		}
		for _, m := range p.Members {
			if !known(m.Source) {
				return fmt.Errorf("--egress-pool %s: no --egress-source is named %s", p.Name, m.Source)
			}
		}
	}
	for stream, pool := range c.StreamPools {
		if !slices.ContainsFunc(c.Pools, func(q Pool) bool { return q.Name == pool }) {
			return fmt.Errorf("--stream-pool %s=%s: no --egress-pool is named %s", stream, pool, pool)
		}
	}
	for src := range c.Warmup {
		if !known(src) {
			return fmt.Errorf("--egress-warmup %s: no --egress-source is named %s", src, src)
		}
	}
	return nil
}

// egress chooses the source of each new connection.
type egress struct {
	sources []Source
	// groups are the members each stream uses ("" for a stream without a
	// pool of its own).
	groups map[string]*group
	warm   *warmup
}

// group is the sources one stream uses, taken by smooth weighted turns
// (each member's share of the picks is its weight's share of the total,
// evenly spread).
type group struct {
	mu      sync.Mutex
	members []PoolMember
	current []int
}

func newEgress(cfg MXConfig) *egress {
	e := &egress{sources: cfg.Sources, groups: map[string]*group{}, warm: newWarmup(cfg.Warmup, cfg.WarmupSchedule, cfg.Now)}
	reserved := map[string]bool{} // sources of a pool some stream has
	for stream, name := range cfg.StreamPools {
		i := slices.IndexFunc(cfg.Pools, func(p Pool) bool { return p.Name == name })
		if i < 0 {
			continue // CheckEgress refuses this configuration
		}
		e.groups[stream] = &group{members: cfg.Pools[i].Members, current: make([]int, len(cfg.Pools[i].Members))}
		for _, m := range cfg.Pools[i].Members {
			reserved[m.Source] = true
		}
	}
	// A stream without a pool uses the sources no stream's pool reserves
	// (all of them when every one is reserved), in turn.
	var rest []PoolMember
	for _, s := range cfg.Sources {
		if !reserved[s.Name] {
			rest = append(rest, PoolMember{Source: s.Name, Weight: 1})
		}
	}
	if len(rest) == 0 {
		for _, s := range cfg.Sources {
			rest = append(rest, PoolMember{Source: s.Name, Weight: 1})
		}
	}
	e.groups[""] = &group{members: rest, current: make([]int, len(rest))}
	return e
}

// groupOf is the group a stream's mail leaves from.
func (e *egress) groupOf(stream string) *group {
	if g, ok := e.groups[stream]; ok {
		return g
	}
	return e.groups[""]
}

// fits reports whether a kept session from src may carry mail of stream:
// src is in the stream's group (or no sources are configured).
func (e *egress) fits(src *Source, stream string) bool {
	if src == nil {
		return len(e.sources) == 0
	}
	return slices.ContainsFunc(e.groupOf(stream).members, func(m PoolMember) bool { return m.Source == src.Name })
}

// pick returns the source for a new connection carrying one message of
// stream to site, its warm-up allowance for today taken; nil and ok
// with no sources configured. When every member is at its warm-up cap
// for site, ok is false and until is when the first one has room again.
func (e *egress) pick(stream, site string) (src *Source, ok bool, until time.Time) {
	if len(e.sources) == 0 {
		return nil, true, time.Time{}
	}
	g := e.groupOf(stream)
	for _, name := range g.order() {
		if e.warm.take(name, site) {
			i := slices.IndexFunc(e.sources, func(s Source) bool { return s.Name == name })
			return &e.sources[i], true, time.Time{}
		}
	}
	return nil, false, e.warm.nextDay()
}

// order is the group's members in the order to try them: the one whose
// weighted turn it is first, then the others by their standing (the
// overflow when the first is at its cap).
func (g *group) order() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	total, best := 0, 0
	for i, m := range g.members {
		g.current[i] += m.Weight
		total += m.Weight
		if g.current[i] > g.current[best] {
			best = i
		}
	}
	g.current[best] -= total
	idx := make([]int, len(g.members))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case a == best:
			return -1
		case b == best:
			return 1
		}
		return g.current[b] - g.current[a]
	})
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = g.members[j].Source
	}
	return out
}
