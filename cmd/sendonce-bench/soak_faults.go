package main

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/tcpproxy"
)

// The fault kinds of the soak's schedule.
const (
	faultKill      = "sigkill"      // SIGKILL a process, restart it
	faultStop      = "sigstop"      // SIGSTOP a process longer than the lease, then SIGCONT
	faultSink451   = "sink-451"     // the sink answers 451 to the end of DATA
	faultSink550   = "sink-550"     // the sink answers 550 to RCPT
	faultHangUp    = "sink-hangup"  // the sink hangs up after DATA (keeping the message or not)
	faultLate      = "sink-late"    // the sink answers 250 only after the attempt's timeout
	faultDropReply = "proxy-drop"   // the SMTP proxy drops the sink's reply to the final dot
	faultPGCut     = "postgres-cut" // the PostgreSQL proxy cuts every connection for a while
)

// rng is the soak's one seeded source, shared by the schedule and the
// sink's draws.
type rng struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newRNG(seed uint64) *rng { return &rng{r: rand.New(rand.NewPCG(seed, seed^0x5eed))} }

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

// injector applies the seeded schedule of faults until its context ends.
type injector struct {
	rng    *rng
	kinds  []string
	nodes  []*node
	sinkFx *sinkFaults
	smtpPx *tcpproxy.Proxy
	pgPx   *tcpproxy.Proxy // nil on SQLite
	lease  time.Duration
	logger *slog.Logger

	mu     sync.Mutex
	counts map[string]int
	// sinkMode is the act the sink draws with sinkP (1/1000), else accept.
	sinkMode sinkAct
	sinkP    int32
}

func (in *injector) count(kind string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.counts[kind]++
}

func (in *injector) figures() map[string]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := map[string]int{}
	for k, v := range in.counts {
		out[k] = v
	}
	return out
}

// pick is the sink's per-transaction draw.
func (in *injector) pick() sinkAct {
	in.mu.Lock()
	mode, p := in.sinkMode, in.sinkP
	in.mu.Unlock()
	if p == 0 || !in.rng.chance(p) {
		return sinkAccept
	}
	if mode == sinkHangUpKept && in.rng.intN(2) == 0 {
		return sinkHangUpLost
	}
	return mode
}

func (in *injector) setSink(mode sinkAct, perMille int32) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.sinkMode, in.sinkP = mode, perMille
}

// run applies one fault after another, with a pause of 0.5–2.5 s between
// them, until ctx ends. Every fault is bounded: a window of at most a few
// seconds, or a stop a little longer than the lease.
func (in *injector) run(ctx context.Context) {
	for {
		if !sleepCtx(ctx, in.rng.between(500*time.Millisecond, 2500*time.Millisecond)) {
			return
		}
		kind := in.kinds[in.rng.intN(len(in.kinds))]
		in.apply(ctx, kind)
	}
}

func (in *injector) apply(ctx context.Context, kind string) {
	in.count(kind)
	window := in.rng.between(time.Second, 3*time.Second)
	switch kind {
	case faultKill:
		n := in.nodes[in.rng.intN(len(in.nodes))]
		in.logger.Info("fault", slog.String("kind", kind), slog.String("node", n.name))
		n.kill()
		sleepCtx(ctx, in.rng.between(200*time.Millisecond, time.Second))
		in.restart(ctx, n)
	case faultStop:
		n := in.nodes[in.rng.intN(len(in.nodes))]
		d := in.lease + in.rng.between(time.Second, 3*time.Second)
		in.logger.Info("fault", slog.String("kind", kind), slog.String("node", n.name), slog.Duration("for", d))
		if n.signal(syscall.SIGSTOP) {
			sleepCtx(ctx, d)
			n.signal(syscall.SIGCONT)
		}
	case faultSink451, faultSink550, faultHangUp, faultLate:
		mode := map[string]sinkAct{faultSink451: sinkTempFail, faultSink550: sinkReject,
			faultHangUp: sinkHangUpKept, faultLate: sinkLate}[kind]
		in.logger.Info("fault", slog.String("kind", kind), slog.Duration("for", window))
		in.setSink(mode, 500)
		sleepCtx(ctx, window)
		in.setSink(sinkAccept, 0)
	case faultDropReply:
		in.logger.Info("fault", slog.String("kind", kind), slog.Duration("for", window))
		in.smtpPx.DropReplies(500)
		sleepCtx(ctx, window)
		in.smtpPx.Pass()
	case faultPGCut:
		in.logger.Info("fault", slog.String("kind", kind), slog.Duration("for", window))
		in.pgPx.Cut()
		sleepCtx(ctx, window)
		in.pgPx.Pass()
	}
}

// restart starts a node again, trying a few times (a restart may land in
// a PostgreSQL cut).
func (in *injector) restart(ctx context.Context, n *node) {
	for try := 1; try <= 10 && ctx.Err() == nil; try++ {
		err := n.start(context.WithoutCancel(ctx))
		if err == nil {
			return
		}
		in.logger.Warn("restart failed", slog.String("node", n.name), slog.Int("try", try), slog.Any("error", err))
		sleepCtx(ctx, time.Second)
	}
}

// heal ends every fault: SIGCONT, restart what is down, sink and proxies
// back to normal.
func (in *injector) heal(ctx context.Context) {
	in.setSink(sinkAccept, 0)
	in.smtpPx.Pass()
	if in.pgPx != nil {
		in.pgPx.Pass()
	}
	for _, n := range in.nodes {
		n.signal(syscall.SIGCONT)
		if !n.running() {
			in.restart(ctx, n)
		}
	}
}

// sleepCtx sleeps d or until ctx ends; it reports whether it slept it all.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
