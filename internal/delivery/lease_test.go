package delivery_test

import (
	"bytes"
	"encoding/base64"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// A large message that a slow relay takes longer to read than the base
// lease is still within its own lease, grown with its size (LeasePerMiB):
// the attempt is not cut off, the rescuer does not call it unknown, and
// it ends sent, delivered once. (With the base lease alone it ends
// unknown, as TestDeliver_AttemptOutlivingItsLeaseIsUnknown shows.)
func TestDeliver_LargeMessageOutlastingTheBaseLeaseIsSent(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		// Base lease 500 ms; 1 MiB of file grows it by 20 s, so that a
		// loaded machine (the race detector, a soak beside) still renders
		// and signs within it. The relay reads the 1.4 MiB on the wire at
		// 1 MiB/s: well past the base lease.
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase,
			Lease: 500 * time.Millisecond, LeasePerMiB: 20 * time.Second})
		env.SMTP.SetBehaviour(smtptest.Behaviour{ReadRate: 1 << 20})
		file := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
		m := sendoncetest.Mail("ann@example.com", "large, slow relay")
		m["attachments"] = []map[string]any{{"filename": "big.bin", "content": base64.StdEncoding.EncodeToString(file)}}
		start := time.Now()
		id := send(t, env, m)

		s := env.WaitStatus(t, id, 2*waitLong, core.StatusSent, core.StatusUnknown, core.StatusFailed)
		if st := str(s, "status"); st != string(core.StatusSent) {
			t.Fatalf("status %q after %v (events %v), want sent", st, time.Since(start), eventTypes(s))
		}
		if took := time.Since(start); took < time.Second {
			t.Fatalf("delivered in %v: the relay did not outlast the base lease, so this proves nothing", took)
		}
		t.Logf("sent %v after the request", time.Since(start))
		if got := attempts(t, s); got != 1 {
			t.Errorf("attempts = %d, want 1", got)
		}
		if ev := eventTypes(s); countOf(ev, "unknown") != 0 {
			t.Errorf("events %v: the rescuer called the attempt unknown", ev)
		}
		if c, n := env.SMTP.Connections(), len(env.SMTP.Messages()); c != 1 || n != 1 {
			t.Errorf("SMTP connections = %d, messages = %d; want 1 and 1", c, n)
		}
	})
}
