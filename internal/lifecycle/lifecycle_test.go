package lifecycle

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestGroup_StartsInOrderStopsInReverse: services start in the order
// added and stop in the reverse one; a failed start stops those before it
// and names the one that failed; Stop stops every started service even
// when one fails, and a second Stop does nothing.
func TestGroup_StartsInOrderStopsInReverse(t *testing.T) {
	var log []string
	svc := func(name string, startErr, stopErr error) Service {
		return Funcs{
			OnStart: func(context.Context) error { log = append(log, "start "+name); return startErr },
			OnStop:  func(context.Context) error { log = append(log, "stop "+name); return stopErr },
		}
	}
	ctx := context.Background()

	var g Group
	g.Add("queue", svc("queue", nil, nil))
	g.Add("inbound", svc("inbound", nil, errors.New("boom")))
	g.Add("http", svc("http", nil, nil))
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	err := g.Stop(ctx)
	if want := []string{"start queue", "start inbound", "start http", "stop http", "stop inbound", "stop queue"}; !slices.Equal(log, want) {
		t.Fatalf("order %v, want %v", log, want)
	}
	if err == nil || !strings.Contains(err.Error(), "stop inbound: boom") {
		t.Fatalf("Stop = %v, want the inbound's failure named", err)
	}
	log = nil
	if err := g.Stop(ctx); err != nil || len(log) != 0 {
		t.Fatalf("a second Stop: %v, %v", err, log)
	}

	log = nil
	var h Group
	h.Add("queue", svc("queue", nil, nil))
	h.Add("inbound", svc("inbound", errors.New("address in use"), nil))
	h.Add("http", svc("http", nil, nil))
	err = h.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "start inbound: address in use") {
		t.Fatalf("Start = %v, want the inbound's failure named", err)
	}
	if want := []string{"start queue", "start inbound", "stop queue"}; !slices.Equal(log, want) {
		t.Fatalf("after a failed start: %v, want %v", log, want)
	}
}

// TestSleep: a pause ends early, and says so, when the part is stopping.
func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("a pause nothing cut short: want true")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Error("a pause of a stopping part: want false at once")
	}
}
