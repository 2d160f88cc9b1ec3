package delivery_test

import (
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// greylister answers 451 to each (client address, sender, recipient) until
// it was first seen wait ago on the test's clock, as postgrey does.
type greylister struct {
	mu    sync.Mutex
	seen  map[string]time.Time
	now   func() time.Time
	wait  time.Duration
	tries int
}

func (g *greylister) rcpt(ip, from, to string) *smtp.SMTPError {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tries++
	k := ip + "|" + from + "|" + to
	first, ok := g.seen[k]
	if !ok {
		g.seen[k], first = g.now(), g.now()
	}
	if g.now().Sub(first) < g.wait {
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "Greylisted, please try again in 30 seconds"}
	}
	return nil
}

// TestMX_GreylistedThenDelivered: an exchanger that greylists for 30 s of
// the test's clock defers the first attempts; once 30 s have passed the
// retry is taken — delivered once, never failed, other mail to the same
// exchanger not held back for long by the deferrals.
func TestMX_GreylistedThenDelivered(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		dns := dnstest.Start(t, twoDestinations...)
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, MX: true, DNSResolver: dns.Addr(),
			RetryBase: 5 * time.Second, MaxRetryDelay: 10 * time.Second})
		g := &greylister{seen: map[string]time.Time{}, now: env.Clock.Now, wait: 30 * time.Second}
		env.SMTP.SetBehaviour(smtptest.Behaviour{RcptFunc: g.rcpt})

		id := send(t, env, map[string]any{"to": "ann@one.test", "subject": "greylisted", "text": "x"})
		waitEvent(t, env, id, core.EventDeliveryDelayed, 1)
		// The retries come as the clock moves; inside the 30 s they are
		// greylisted again, after it the exchanger takes the message.
		deadline := time.Now().Add(waitLong)
		for str(getSend(t, env, id), "status") != string(core.StatusDelivered) {
			if time.Now().After(deadline) {
				t.Fatalf("not delivered: %v", getSend(t, env, id))
			}
			env.Clock.Advance(5 * time.Second)
			time.Sleep(100 * time.Millisecond)
		}
		if got := messagesTo(env.SMTP); got["ann@one.test"] != 1 {
			t.Fatalf("the exchanger got %v, want ann@ once", got)
		}
		g.mu.Lock()
		tries := g.tries
		g.mu.Unlock()
		if tries < 2 {
			t.Fatalf("%d RCPTs reached the greylister, want the deferred one and the retry", tries)
		}
		if ev := eventDetails(getSend(t, env, id), core.EventFailed); ev != "" {
			t.Fatalf("greylisting failed the send: %s", ev)
		}
	})
}
