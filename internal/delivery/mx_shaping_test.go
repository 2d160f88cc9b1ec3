package delivery_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestMX_ShapingLearnsAConnectionLimit: an exchanger on 127.0.0.7, found
// through a real DNS server, takes 2 connections at once and greets a
// third "421 4.7.0 Too many concurrent SMTP connections", as providers do.
// 300 sends are all delivered, each once, and after the first refusals the
// destination's connection limit is the server's: few connections are
// turned away (without shaping, a hundred workers dialling at once were
// turned away a thousand times).
func TestMX_ShapingLearnsAConnectionLimit(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		const n = 300
		mx := smtptest.Start(t, smtptest.Options{Addr: "127.0.0.7:0", MaxConns: 2})
		dns := dnstest.Start(t, "shaped.test. MX 10 mx.shaped.test.", "mx.shaped.test. A 127.0.0.7")
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, MX: true, MXPort: mx.Port, DNSResolver: dns.Addr(),
			RetryBase: 50 * time.Millisecond})

		ids := make([]string, n)
		queueBacklog(t, n, 8, func(i int) (err error) {
			ids[i], err = env.TrySend(fmt.Sprintf("shaped-%d", i), map[string]any{"to": fmt.Sprintf("u%d@shaped.test", i), "subject": "s", "text": "x"})
			return err
		})
		deadline := time.Now().Add(90 * time.Second)
		for len(mx.Messages()) < n && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(settle)
		counts := mx.MessageIDCounts()
		if len(counts) != n {
			t.Errorf("%d distinct messages delivered, want %d", len(counts), n)
		}
		for id, c := range counts {
			if c != 1 {
				t.Errorf("message %s delivered %d times", id, c)
			}
		}
		for _, id := range ids[:10] {
			if id != "" {
				env.WaitStatus(t, id, waitLong, core.StatusDelivered)
			}
		}
		refused := mx.Refused()
		t.Logf("%d messages over %d connections, %d connections refused", len(mx.Messages()), mx.Connections(), refused)
		if refused > 20 {
			t.Errorf("%d connections refused: the destination's limit was not learned", refused)
		}
		if mx.Connections() > n/10 {
			t.Errorf("%d connections for %d messages: sessions are not reused", mx.Connections(), n)
		}
		// The tenant's admin sees the destination, its limit and the
		// codes of the reply that lowered it — not the reply's text, the
		// exchanger's words about every tenant's traffic.
		r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/admin/destinations", Key: env.AdminKey})
		var site map[string]any
		data, _ := r.JSON(t)["data"].([]any)
		for _, d := range data {
			if m, _ := d.(map[string]any); m["site"] == "mx.shaped.test" {
				site = m
			}
		}
		if r.Status != http.StatusOK || site == nil || site["connection_limit"] != float64(2) || site["throttled"].(float64) < 1 ||
			site["why"] != "421 4.7.0" {
			t.Errorf("GET /v1/admin/destinations: %d %s", r.Status, r.Body)
		}
		m := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/metrics"})
		if !strings.Contains(string(m.Body), `sendonce_destination_throttles_total{action="connections"}`) {
			t.Errorf("no throttle in /metrics")
		}
	})
}
