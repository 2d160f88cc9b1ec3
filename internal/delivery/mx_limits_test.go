package delivery_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestMX_ProviderLimitsAcrossDomains: three exchangers on 127.0.0.40–42,
// found through a real DNS server, enforce limits as providers do — 3
// connections at once (a fourth greeted 421), 20 messages a connection
// (then 421 and close), 100 messages a second (then Gmail's 421-4.7.28).
// The shaping file gives their destinations those limits, the rate with
// headroom (60 a second: a token bucket's burst meeting the server's
// fixed one-second window drew a 421 at 90, and one 421 defers the whole
// destination past the test's deadline under -race). 1,500 sends over
// four domains (two share an exchanger: one destination) all arrive, each
// once, and what the exchangers saw never passed the file's limits.
func TestMX_ProviderLimitsAcrossDomains(t *testing.T) {
	const n = 1500
	var servers []*smtptest.Server
	port := ""
	for i := range 3 {
		addr := fmt.Sprintf("127.0.0.%d:%s", 40+i, port)
		if port == "" {
			addr = "127.0.0.40:0"
		}
		s := smtptest.Start(t, smtptest.Options{Addr: addr, MaxConns: 3, MaxMessagesPerConn: 20, MaxRate: 100})
		port = s.Port
		servers = append(servers, s)
	}
	domains := []string{"a.test", "b.test", "c.test", "a2.test"}
	dns := dnstest.Start(t,
		"a.test. MX 10 mx.a.prov.test.", "mx.a.prov.test. A 127.0.0.40", "a2.test. MX 10 mx.a.prov.test.",
		"b.test. MX 10 mx.b.prov.test.", "mx.b.prov.test. A 127.0.0.41",
		"c.test. MX 10 mx.c.prov.test.", "mx.c.prov.test. A 127.0.0.42")
	shaping := filepath.Join(t.TempDir(), "shaping.json")
	rules := `{"rules": [{"name": "prov", "mx_suffix": ["prov.test"],
		"max_connections": 3, "max_messages_per_connection": 20, "max_messages_per_second": 60}]}`
	if err := os.WriteFile(shaping, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	env := sendoncetest.Start(t, sendoncetest.Options{MX: true, MXPort: port, DNSResolver: dns.Addr(), Shaping: shaping,
		RetryBase: 50 * time.Millisecond})

	queueBacklog(t, n, 8, func(i int) error {
		to := fmt.Sprintf("u%d@%s", i, domains[i%len(domains)])
		_, err := env.TrySend(fmt.Sprintf("lim-%d", i), map[string]any{"to": to, "subject": "s", "text": "x"})
		return err
	})
	total := func() int {
		c := 0
		for _, s := range servers {
			c += len(s.Messages())
		}
		return c
	}
	for deadline := time.Now().Add(90 * time.Second); total() < n && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(settle)
	seen := map[string]int{}
	for i, s := range servers {
		for id, c := range s.MessageIDCounts() {
			seen[id] += c
		}
		t.Logf("exchanger %d: %d messages, %d connections (peak %d at once, %d refused), peak %d messages a connection, %d throttled",
			i, len(s.Messages()), s.Connections(), s.PeakConnections(), s.Refused(), s.PeakMessagesPerConn(), s.Throttled())
		if s.PeakConnections() > 3 || s.PeakMessagesPerConn() > 20 {
			t.Errorf("exchanger %d saw %d connections at once and %d messages on one: past the shaping file's 3 and 20",
				i, s.PeakConnections(), s.PeakMessagesPerConn())
		}
		if s.Refused()+s.Throttled() > 10 {
			t.Errorf("exchanger %d turned away %d connections and throttled %d MAILs: the limits were not kept", i, s.Refused(), s.Throttled())
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct messages arrived, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("message %s arrived %d times", id, c)
		}
	}
}
