package delivery_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestReputation_HandoffBouncesCount: under --transport mx the commonest
// permanent bounce is the recipient's own exchanger answering 550 5.1.1
// to RCPT, during the handoff. Two of ten bulk sends refused so are a
// bounce rate of 0.2 over ten sends (the refused ones, never accepted by a
// next hop, count among the window's sends): the stream pauses, as it
// would for two bounce reports.
func TestReputation_HandoffBouncesCount(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		dns := dnstest.Start(t, "rcpt.test. MX 10 mx1.rcpt.test.", "mx1.rcpt.test. A 127.0.0.1")
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, MX: true, RetryBase: retryBase,
			DNSResolver: dns.Addr(), Reputation: repThresholds})
		gone := &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
		env.SMTP.SetBehaviour(smtptest.Behaviour{RcptErrFor: map[string]*smtp.SMTPError{"r0@rcpt.test": gone, "r1@rcpt.test": gone}})
		// Eight delivered first, then two refused: each refusal is judged
		// when it is recorded, over the window as it is then.
		send := func(i int, want core.Status) {
			r := env.Send(t, fmt.Sprint("h", i), map[string]any{"to": fmt.Sprintf("r%d@rcpt.test", i), "subject": "news", "text": "x", "stream": "bulk"})
			if r.Status != http.StatusOK {
				t.Fatalf("bulk send: %d %s", r.Status, r.Body)
			}
			env.WaitStatus(t, r.JSON(t)["id"].(string), waitLong, want)
		}
		for i := 2; i < 10; i++ {
			send(i, core.StatusDelivered)
		}
		send(0, core.StatusBounced)
		send(1, core.StatusBounced)
		rep := reputationOf(t, env)
		if rep["state"] != "paused" || rep["bounce_rate"] != 0.2 || rep["window_sends"] != float64(10) {
			t.Fatalf("two of ten refused at RCPT: %v, want paused at a bounce rate of 0.2 over 10 sends", rep)
		}
	})
}
