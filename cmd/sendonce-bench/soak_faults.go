package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sendonce/sendonce/internal/lifecycle"
	"github.com/sendonce/sendonce/internal/testkit/faultproxy"
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

// injector applies the schedule of faults, drawn up front, beside the
// clients, and draws the sink's fate for each transaction while a sink
// fault is on.
type injector struct {
	sched   []faultEvent
	start   time.Time // the soak's start, from which the schedule counts
	sinkRNG *rng
	nodes   []*node
	smtpPx  *tcpproxy.Proxy
	pgPx    *tcpproxy.Proxy // nil on SQLite
	ses     *sesLeg         // the provider soak's SES, else nil
	logger  *slog.Logger

	mu      sync.Mutex
	counts  map[string]int
	applied []string      // each fault as it was applied, for a failure's report
	maxLate time.Duration // the most a fault began after its time
	// sinkMode is the act the sink draws with sinkP (1/1000), else accept.
	sinkMode sinkAct
	sinkP    int32
}

func (in *injector) figures() map[string]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return maps.Clone(in.counts)
}

// pick is the sink's per-transaction draw.
func (in *injector) pick() sinkAct {
	in.mu.Lock()
	mode, p := in.sinkMode, in.sinkP
	in.mu.Unlock()
	if p == 0 || !in.sinkRNG.chance(p) {
		return sinkAccept
	}
	if mode == sinkHangUpKept && in.sinkRNG.intN(2) == 0 {
		return sinkHangUpLost
	}
	return mode
}

func (in *injector) setSink(mode sinkAct, perMille int32) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.sinkMode, in.sinkP = mode, perMille
}

// run applies the schedule's faults, each at its time (or as soon as the
// one before has ended, if that is later), until ctx ends. Faults never
// overlap: each ends before the next begins.
func (in *injector) run(ctx context.Context) {
	for i, e := range in.sched {
		if !in.sleepUntil(ctx, e.at) {
			return
		}
		in.apply(ctx, i, e)
	}
}

// sleepUntil sleeps until off after the soak's start; false if ctx ended.
func (in *injector) sleepUntil(ctx context.Context, off time.Duration) bool {
	return lifecycle.Sleep(ctx, time.Until(in.start.Add(off)))
}

func (in *injector) apply(ctx context.Context, i int, e faultEvent) {
	late := time.Since(in.start) - e.at
	var n *node
	if e.kind == faultKill || e.kind == faultStop {
		n = in.nodes[e.node]
	}
	in.logger.Info("fault", slog.Int("n", i+1), slog.String("what", faultWhat(e, n)),
		slog.Duration("for", e.hold), slog.Duration("late", late))
	ok := true
	switch e.kind {
	case faultKill:
		if ok = n.kill(); ok {
			in.sleepUntil(ctx, e.at+e.hold)
			in.restart(ctx, n)
		}
	case faultStop:
		if ok = n.signal(syscall.SIGSTOP); ok {
			in.sleepUntil(ctx, e.at+e.hold)
			n.signal(syscall.SIGCONT)
		}
	case faultSink451, faultSink550, faultHangUp, faultLate:
		mode := map[string]sinkAct{faultSink451: sinkTempFail, faultSink550: sinkReject,
			faultHangUp: sinkHangUpKept, faultLate: sinkLate}[e.kind]
		in.setSink(mode, 500)
		in.sleepUntil(ctx, e.at+e.hold)
		in.setSink(sinkAccept, 0)
	case faultDropReply:
		in.smtpPx.DropReplies(500)
		in.sleepUntil(ctx, e.at+e.hold)
		in.smtpPx.Pass()
	case faultPGCut:
		in.pgPx.Cut()
		in.sleepUntil(ctx, e.at+e.hold)
		in.pgPx.Pass()
	case faultSESDrop, faultSESReset, faultSES503, faultSESLate, faultSESDown:
		in.ses.set(sesFaults[e.kind])
		in.sleepUntil(ctx, e.at+e.hold)
		in.ses.set(faultproxy.Pass)
	}
	in.record(i, e, n, late, ok)
}

// record counts a fault that was applied (a signal to a process that was
// down is not) and notes it, with how late it began.
func (in *injector) record(i int, e faultEvent, n *node, late time.Duration, ok bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	line := fmt.Sprintf("fault %d at %.3fs: %s for %.3fs", i+1, e.at.Seconds(), faultWhat(e, n), e.hold.Seconds())
	if late >= 100*time.Millisecond {
		line += fmt.Sprintf(", began %.3fs late", late.Seconds())
	}
	if !ok {
		line += ", not applied: the process was down"
	} else {
		in.counts[e.kind]++
	}
	in.maxLate = max(in.maxLate, late)
	in.applied = append(in.applied, line)
}

// appliedFaults is every fault as applied, and the most one began late.
func (in *injector) appliedFaults() ([]string, time.Duration) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.applied), in.maxLate
}

// faultWhat names a fault and the process it strikes, if any.
func faultWhat(e faultEvent, n *node) string {
	if n == nil {
		return e.kind
	}
	return e.kind + " " + n.name
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
		lifecycle.Sleep(ctx, time.Second)
	}
}

// heal ends every fault: SIGCONT, restart what is down, sink and proxies
// back to normal.
func (in *injector) heal(ctx context.Context) {
	in.setSink(sinkAccept, 0)
	in.smtpPx.Pass()
	if in.ses != nil {
		in.ses.set(faultproxy.Pass)
	}
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
