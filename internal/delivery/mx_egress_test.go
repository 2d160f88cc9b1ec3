package delivery_test

import (
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestMX_EgressSources: connections bind the egress sources' addresses in
// turn, each saying its own EHLO name (or --helo-name); the exchanger sees
// both.
func TestMX_EgressSources(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		mx := smtptest.Start(t, smtptest.Options{Addr: "127.0.0.8:0"})
		dns := dnstest.Start(t, "egress.test. MX 10 mx.egress.test.", "mx.egress.test. A 127.0.0.8")
		shaping := filepath.Join(t.TempDir(), "shaping.json")
		// One message a connection, so that each message opens one.
		if err := os.WriteFile(shaping, []byte(`{"default": {"max_messages_per_connection": 1}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, MX: true, MXPort: mx.Port, DNSResolver: dns.Addr(),
			Shaping: shaping, HELOName: "mta.sender.test",
			EgressSources: []string{"first=127.0.0.5,ehlo=first.sender.test", "second=127.0.0.6"}})
		for range 4 {
			id := send(t, env, map[string]any{"to": "ann@egress.test", "subject": "s", "text": "x"})
			env.WaitStatus(t, id, waitLong, core.StatusDelivered)
		}
		seen := map[string]string{}
		for _, m := range mx.Messages() {
			if prev, ok := seen[m.RemoteIP]; ok && prev != m.Helo {
				t.Errorf("%s said EHLO %s and %s", m.RemoteIP, prev, m.Helo)
			}
			seen[m.RemoteIP] = m.Helo
		}
		want := map[string]string{"127.0.0.5": "first.sender.test", "127.0.0.6": "mta.sender.test"}
		if !maps.Equal(seen, want) {
			t.Errorf("the exchanger saw %v, want %v", seen, want)
		}
	})
}
