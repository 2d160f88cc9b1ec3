package main

import (
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"time"
)

// rng is one seeded stream of draws. Each consumer of the soak (the fault
// schedule, each client, the sink, each proxy) has a stream of its own,
// derived from the seed and its name: a stream shared by consumers that
// draw concurrently would hand out its values in an order set by the
// scheduler, so the same seed would give a different run every time.
type rng struct {
	mu sync.Mutex
	r  *rand.Rand
}

// newStream is the stream called name of seed.
func newStream(seed uint64, name string) *rng {
	h := fnv.New64a()
	h.Write([]byte(name))
	return &rng{r: rand.New(rand.NewPCG(seed, h.Sum64()))}
}

func (g *rng) intN(n int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.r.IntN(n)
}

// between is a duration in [lo, hi).
func (g *rng) between(lo, hi time.Duration) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return lo + time.Duration(g.r.Int64N(int64(hi-lo)))
}

func (g *rng) chance(perMille int32) bool { return int32(g.intN(1000)) < perMille }

// faultEvent is one fault of the schedule, drawn before the soak begins.
type faultEvent struct {
	at   time.Duration // when it begins, after the soak's start
	kind string
	node int // sigkill, sigstop: the process, an index into the nodes
	// hold is how long it lasts: the window of a sink or proxy fault, the
	// stop, or the time a killed process stays down before its restart.
	hold time.Duration
}

// drawSchedule draws the faults of a soak of duration from g: one after
// another, a pause of 0.5–2.5 s before each; a sink or proxy window of
// 1–3 s; a stop of the lease plus 1–3 s (longer than any attempt may hold
// its send); a kill with a restart 0.2–1 s later. Times are offsets from
// the soak's start, so a seed names the same faults at the same moments
// however loaded the machine is; only a fault that cannot begin on time
// (a restart before it was slow) begins late, and the report says so.
func drawSchedule(g *rng, kinds []string, nodes int, lease, duration time.Duration) []faultEvent {
	var out []faultEvent
	at := time.Duration(0)
	for {
		at += g.between(500*time.Millisecond, 2500*time.Millisecond)
		if at >= duration {
			return out
		}
		e := faultEvent{at: at, kind: kinds[g.intN(len(kinds))]}
		switch e.kind {
		case faultKill:
			e.node, e.hold = g.intN(nodes), g.between(200*time.Millisecond, time.Second)
		case faultStop:
			e.node, e.hold = g.intN(nodes), lease+g.between(time.Second, 3*time.Second)
		default:
			e.hold = g.between(time.Second, 3*time.Second)
		}
		out = append(out, e)
		at += e.hold
	}
}

// rounds hands out kinds in rounds: each round every kind once, in an
// order drawn from g. A leg's short soak (the minute of CI) then meets
// every kind of its windows, which a draw per window left to chance.
type rounds struct {
	g     *rng
	kinds []string
	left  []string
}

func (r *rounds) next() string {
	if len(r.left) == 0 {
		r.left = append([]string(nil), r.kinds...)
		for i := len(r.left) - 1; i > 0; i-- {
			j := r.g.intN(i + 1)
			r.left[i], r.left[j] = r.left[j], r.left[i]
		}
	}
	k := r.left[0]
	r.left = r.left[1:]
	return k
}
