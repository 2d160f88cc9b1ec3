package delivery

import (
	"fmt"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
)

// TestRelays_Bounded: every distinct relay URL a tenant set used to get a
// pooled transport that was never dropped. The map now keeps at most
// MaxRelays, drops tenant relays idle past RelayIdleTTL, and never drops
// the operator's.
func TestRelays_Bounded(t *testing.T) {
	d, err := NewDeliverer(app.New(nil, app.Config{}, nil), nil, Config{DefaultTransport: "smtp://relay.example.com:2525?tls=none"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	clock := time.Now()
	d.relays.now = func() time.Time { return clock }
	for i := range MaxRelays + 50 {
		clock = clock.Add(time.Millisecond)
		if _, err := d.smtpTransport(fmt.Sprintf("smtp://relay%d.example.com:25", i), true); err != nil {
			t.Fatal(err)
		}
	}
	if n := d.relayCount(); n > MaxRelays {
		t.Fatalf("%d relays kept, want at most %d", n, MaxRelays)
	}
	op, _ := d.smtpTransport("smtp://relay.example.com:2525?tls=none", false)
	clock = clock.Add(RelayIdleTTL)
	if _, err := d.smtpTransport("smtp://fresh.example.com:25", true); err != nil {
		t.Fatal(err)
	}
	if n := d.relayCount(); n != 2 {
		t.Fatalf("%d relays after the idle time, want the operator's and the fresh one", n)
	}
	if again, _ := d.smtpTransport("smtp://relay.example.com:2525?tls=none", false); again != op {
		t.Fatal("the operator's relay was replaced")
	}
}
