package delivery

import (
	"errors"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/transport"
)

func TestBreaker_OpensAfterTripsAndProbesAfterCoolDown(t *testing.T) {
	var b breakers
	b.register(nil)
	now := time.Unix(1_000_000, 0)
	refused := &transport.Error{Class: transport.Temporary, Stage: transport.StageConnect, Err: errors.New("refused")}
	for i := range BreakerTrips {
		if !b.allow("p", now) {
			t.Fatalf("closed breaker refused try %d", i+1)
		}
		b.done("p", refused, now)
	}
	if b.allow("p", now.Add(BreakerCoolDown-time.Second)) {
		t.Fatal("open breaker allowed a try within its cool-down")
	}
	after := now.Add(BreakerCoolDown + time.Second)
	if !b.allow("p", after) {
		t.Fatal("no half-open try after the cool-down")
	}
	if b.allow("p", after) {
		t.Fatal("a second try while the half-open one runs")
	}
	b.done("p", refused, after) // the probe failed: open again
	if b.allow("p", after.Add(time.Second)) {
		t.Fatal("a failed probe did not open the breaker again")
	}
	later := after.Add(BreakerCoolDown + time.Second)
	if !b.allow("p", later) {
		t.Fatal("no probe after the second cool-down")
	}
	b.done("p", nil, later) // success closes it
	if !b.allow("p", later) || !b.allow("p", later) {
		t.Fatal("a successful probe did not close the breaker")
	}
	// A maybe-accepted outcome is no proof of a dead transport.
	maybe := &transport.Error{Class: transport.Temporary, MaybeAccepted: true}
	for range BreakerTrips + 1 {
		b.done("q", maybe, now)
	}
	if !b.allow("q", now) {
		t.Fatal("maybe-accepted outcomes opened the breaker")
	}
}
