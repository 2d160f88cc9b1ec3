package delivery_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/server"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/resendtest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestMX_ChainLinkKeepsTheRoadsPolicies: --transport mx first in a
// failover chain delivers the way mx alone does. An exchanger an MTA-STS
// enforce policy does not allow (no STARTTLS) never gets the message in
// plain text: the mx link defers and the fallback takes it; a domain whose
// exchanger has a verified certificate is delivered by mx, per recipient,
// and the fallback gets nothing for it.
func TestMX_ChainLinkKeepsTheRoadsPolicies(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		ca, caFile, plain, secure := stsExchangers(t)
		stsPort, _ := startSTSPolicies(t, ca, map[string]string{
			"mta-sts.plain.test": "version: STSv1\nmode: enforce\nmx: mx.plain.test\nmax_age: 86400\n",
			"mta-sts.good.test":  "version: STSv1\nmode: enforce\nmx: *.good.test\nmax_age: 86400\n",
		})
		dns := dnstest.Start(t,
			"plain.test. MX 10 mx.plain.test.", "mx.plain.test. A 127.0.0.10",
			`_mta-sts.plain.test. TXT "v=STSv1; id=1"`, "mta-sts.plain.test. A 127.0.0.12",
			"good.test. MX 10 mx.good.test.", "mx.good.test. A 127.0.0.11",
			`_mta-sts.good.test. TXT "v=STSv1; id=1"`, "mta-sts.good.test. A 127.0.0.12",
		)
		fallback := resendtest.Start(t, resendKey)
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, MX: true, MXPort: plain.Port, DNSResolver: dns.Addr(),
			TLSCA: caFile, MTASTSPort: stsPort, RetryBase: 20 * time.Millisecond,
			Providers: server.ProvidersConfig{Fallbacks: []string{resendURL(fallback.Host)}}})

		refused := send(t, env, map[string]any{"to": "ann@plain.test", "subject": "enforce", "text": "x"})
		s := env.WaitStatus(t, refused, waitLong, core.StatusSent)
		if h := handoffs(s); len(h) != 2 || !strings.HasPrefix(h[0], "mx: not accepted") || !strings.Contains(h[0], "STARTTLS") ||
			!strings.Contains(h[1], "accepted as") {
			t.Errorf("handoffs %q, want mx deferred for want of STARTTLS, then the fallback", h)
		}
		if n := len(plain.Messages()); n != 0 {
			t.Fatalf("the exchanger the enforce policy does not allow got %d messages in plain text", n)
		}

		good := send(t, env, map[string]any{"to": "bob@good.test", "subject": "enforce", "text": "x"})
		s = env.WaitStatus(t, good, waitLong, core.StatusDelivered)
		if msgs := secure.Messages(); len(msgs) != 1 || !msgs[0].TLS {
			t.Errorf("the enforce domain's exchanger got %+v, want one message over TLS", msgs)
		}
		if ev := eventDetails(s, core.EventSent); !strings.Contains(ev, "certificate verified") {
			t.Errorf("sent event %q does not record the verified TLS", ev)
		}
		time.Sleep(settle)
		if n := len(fallback.Emails()); n != 1 {
			t.Errorf("the fallback holds %d emails, want 1 (ann's only)", n)
		}
	})
}
