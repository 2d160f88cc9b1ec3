package dnscheck

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestProbeCache_OneProbeSharedOnlyAWholeOneKept: probes of one
// exchanger that overlap run once and all get its outcome; another
// exchanger (or EHLO name) is probed on its own; a probe whose caller
// gave up is not kept, and one who waited on it probes itself; a probe
// that panicked leaves no one waiting and nothing kept; an outcome is
// kept for the TTL and no longer.
func TestProbeCache_OneProbeSharedOnlyAWholeOneKept(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var clock sync.Mutex
	c := NewProbeCache(time.Minute, func() time.Time { clock.Lock(); defer clock.Unlock(); return now })
	x := exchanger{receiver: "rx.test", host: "mx.rx.test", ip: netip.MustParseAddr("192.0.2.1")}
	k := probeKey{exchanger: x, port: "25", helo: "out.test"}
	var probes atomic.Int32
	release := make(chan struct{})
	slow := func() tlsOutcome { probes.Add(1); <-release; return tlsOutcome{tls: true} }

	var wg sync.WaitGroup
	outs := make([]tlsOutcome, 5)
	for i := range outs {
		wg.Add(1)
		go func() { defer wg.Done(); outs[i] = c.outcome(context.Background(), k, slow) }()
	}
	for deadline := time.Now().Add(10 * time.Second); probes.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no probe started")
		}
	}
	close(release)
	wg.Wait()
	if n := probes.Load(); n != 1 {
		t.Fatalf("%d probes for five overlapping checks, want 1", n)
	}
	for i, o := range outs {
		if !o.tls {
			t.Errorf("check %d did not get the probe's outcome", i)
		}
	}
	fast := func() tlsOutcome { probes.Add(1); return tlsOutcome{} }
	if c.outcome(context.Background(), k, fast); probes.Load() != 1 {
		t.Error("a check within the TTL probed again")
	}
	other := k
	other.helo = "another.test"
	if c.outcome(context.Background(), other, fast); probes.Load() != 2 {
		t.Error("another EHLO name was answered from the cache")
	}

	cut := k
	cut.port = "2525"
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.outcome(ctx, cut, func() tlsOutcome { probes.Add(1); return tlsOutcome{err: errors.New("canceled")} })
	if o := c.outcome(context.Background(), cut, fast); probes.Load() != 4 || o.err != nil {
		t.Errorf("a probe its caller gave up on was kept: %d probes, outcome %v", probes.Load(), o.err)
	}

	// One who waited on a probe its caller gave up on probes itself.
	gaveUp := k
	gaveUp.port = "587"
	ctxA, cancelA := context.WithCancel(context.Background())
	releaseA, startedA := make(chan struct{}), make(chan struct{})
	doneA := make(chan struct{})
	go func() {
		defer close(doneA)
		c.outcome(ctxA, gaveUp, func() tlsOutcome {
			close(startedA)
			<-releaseA
			return tlsOutcome{err: errors.New("canceled")}
		})
	}()
	<-startedA
	doneB := make(chan tlsOutcome)
	go func() {
		doneB <- c.outcome(context.Background(), gaveUp, func() tlsOutcome { return tlsOutcome{tls: true} })
	}()
	cancelA()
	close(releaseA)
	<-doneA
	if o := <-doneB; o.err != nil || !o.tls {
		t.Errorf("a waiter got the outcome of a probe its caller gave up on: %+v", o)
	}

	// A probe that panics leaves no one waiting and nothing kept.
	panicked := k
	panicked.port = "465"
	func() {
		defer func() { _ = recover() }()
		c.outcome(context.Background(), panicked, func() tlsOutcome { panic("hostile exchanger") })
	}()
	bounded, cancelBounded := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelBounded()
	if o := c.outcome(bounded, panicked, func() tlsOutcome { return tlsOutcome{tls: true} }); !o.tls {
		t.Errorf("after a probe panicked: %+v, want a probe anew", o)
	}

	clock.Lock()
	now = now.Add(time.Minute)
	clock.Unlock()
	if c.outcome(context.Background(), k, fast); probes.Load() != 5 {
		t.Error("a check past the TTL did not probe again")
	}
}
