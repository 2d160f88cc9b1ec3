package delivery_test

import (
	"testing"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestMX_OneRecipientDestinationGetsItsOwnBounceAddress: under
// --transport mx a send is one transaction per destination; the
// destination of one recipient gets a bounce address bound to that
// recipient (a report to it speaks for that recipient only), the one of
// several the send's shared address.
func TestMX_OneRecipientDestinationGetsItsOwnBounceAddress(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		dns := dnstest.Start(t, twoDestinations...)
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, MX: true, DNSResolver: dns.Addr(), BounceDomain: "bounces.example.test"})
		id := send(t, env, map[string]any{"to": []string{"ann@one.test", "bob@two.test"}, "cc": "cy@also-one.test", "subject": "split", "text": "x"})
		env.WaitStatus(t, id, waitLong, core.StatusDelivered)
		from := map[string]string{}
		for _, m := range env.SMTP.Messages() {
			for _, r := range m.To {
				from[r] = m.From
			}
		}
		// bob@ is the send's second recipient (to, then cc).
		if want := env.Server.Bounce.RecipientAddress(id, 1); from["bob@two.test"] != want {
			t.Errorf("bob@'s transaction came from %q, want its own %q", from["bob@two.test"], want)
		}
		if want := env.Server.Bounce.Address(id); from["ann@one.test"] != want || from["cy@also-one.test"] != want {
			t.Errorf("ann@ and cy@'s transaction came from %q / %q, want the shared %q", from["ann@one.test"], from["cy@also-one.test"], want)
		}
	})
}
