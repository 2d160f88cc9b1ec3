package delivery_test

import (
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestMX_MTASTS: policies published by a real DNS server and served over
// HTTPS on loopback, certificates from a CA made here (--tls-ca).
//   - enforce, and the exchanger offers no STARTTLS: deferred, never
//     delivered in plain text;
//   - enforce, and the exchanger has a certificate the CA issued for its
//     name: delivered over verified TLS;
//   - testing, no STARTTLS: delivered, the policy's failure recorded.
func TestMX_MTASTS(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		ca, caFile, plain, secure := stsExchangers(t)

		policies := map[string]string{
			"mta-sts.plain.test": "version: STSv1\nmode: enforce\nmx: mx.plain.test\nmax_age: 86400\n",
			"mta-sts.good.test":  "version: STSv1\nmode: enforce\nmx: *.good.test\nmax_age: 86400\n",
			"mta-sts.try.test":   "version: STSv1\nmode: testing\nmx: mx.try.test\nmax_age: 86400\n",
		}
		stsPort, fetchedOf := startSTSPolicies(t, ca, policies)
		dns := dnstest.Start(t,
			"plain.test. MX 10 mx.plain.test.", "mx.plain.test. A 127.0.0.10",
			`_mta-sts.plain.test. TXT "v=STSv1; id=20240101"`, "mta-sts.plain.test. A 127.0.0.12",
			"good.test. MX 10 mx.good.test.", "mx.good.test. A 127.0.0.11",
			`_mta-sts.good.test. TXT "v=STSv1; id=1"`, "mta-sts.good.test. A 127.0.0.12",
			"try.test. MX 10 mx.try.test.", "mx.try.test. A 127.0.0.10",
			`_mta-sts.try.test. TXT "v=STSv1; id=7"`, "mta-sts.try.test. A 127.0.0.12",
		)
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, MX: true, MXPort: plain.Port, DNSResolver: dns.Addr(),
			TLSCA: caFile, MTASTSPort: stsPort, RetryBase: 20 * time.Millisecond})

		refused := send(t, env, map[string]any{"to": "ann@plain.test", "subject": "enforce", "text": "x"})
		good := send(t, env, map[string]any{"to": "bob@good.test", "subject": "enforce", "text": "x"})
		tried := send(t, env, map[string]any{"to": "cy@try.test", "subject": "testing", "text": "x"})

		s := env.WaitStatus(t, good, waitLong, core.StatusDelivered)
		if msgs := secure.Messages(); len(msgs) != 1 || !msgs[0].TLS {
			t.Errorf("the enforce domain's exchanger got %+v, want one message over TLS", msgs)
		}
		if ev := eventDetails(s, core.EventSent); !strings.Contains(ev, "certificate verified") {
			t.Errorf("sent event %q does not record the verified TLS", ev)
		}
		s = env.WaitStatus(t, tried, waitLong, core.StatusDelivered)
		if ev := eventDetails(s, core.EventSent); !strings.Contains(ev, "MTA-STS testing") {
			t.Errorf("sent event %q does not record the testing policy's failure", ev)
		}
		waitEvent(t, env, refused, core.EventDeliveryDelayed, 2)
		time.Sleep(settle)
		for _, m := range plain.Messages() {
			for _, r := range m.To {
				if r == "ann@plain.test" {
					t.Fatalf("ann@plain.test got the message in plain text despite the enforce policy")
				}
			}
		}
		if st := str(getSend(t, env, refused), "status"); st != string(core.StatusQueued) && st != string(core.StatusSending) {
			t.Errorf("enforce without TLS: status %s, want queued (deferred)", st)
		}
		if le := str(getSend(t, env, refused), "last_error"); !strings.Contains(le, "STARTTLS") {
			t.Errorf("last_error %q does not say why", le)
		}
		// Each policy was fetched once and then kept for its max_age.
		if fetched := fetchedOf(); fetched["mta-sts.plain.test"] != 1 || fetched["mta-sts.good.test"] != 1 {
			t.Errorf("policy fetches %v, want one each (cached)", fetched)
		}
	})
}

// stsExchangers makes a CA (its PEM in caFile, for --tls-ca) and two
// exchangers on one port: plain (127.0.0.10) offers no STARTTLS, secure
// (127.0.0.11) a certificate the CA issued for mx.good.test.
func stsExchangers(t *testing.T) (ca *smtptest.CA, caFile string, plain, secure *smtptest.Server) {
	t.Helper()
	ca = smtptest.NewCA(t)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	plain = smtptest.Start(t, smtptest.Options{Addr: "127.0.0.10:0"})
	secure = smtptest.Start(t, smtptest.Options{Addr: "127.0.0.11:" + plain.Port, TLSConfig: ca.Server(t, "mx.good.test")})
	return ca, caFile, plain, secure
}

// startSTSPolicies serves policies (by mta-sts.DOMAIN host) over HTTPS on
// 127.0.0.12 with a certificate of ca; fetched counts the requests per
// host.
func startSTSPolicies(t *testing.T, ca *smtptest.CA, policies map[string]string) (port string, fetched func() map[string]int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.12:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	counts := map[string]int{}
	hosts := make([]string, 0, len(policies))
	for h := range policies {
		hosts = append(hosts, h)
	}
	https := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			host, _, _ := net.SplitHostPort(r.Host)
			mu.Lock()
			counts[host]++
			mu.Unlock()
			p, ok := policies[host]
			if !ok || r.URL.Path != "/.well-known/mta-sts.txt" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(p))
		}),
		TLSConfig: ca.Server(t, hosts...),
	}
	go func() { _ = https.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { https.Close() })
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(counts)
	}
}

// eventDetails joins the details of a send's events of one type.
func eventDetails(s map[string]any, typ string) string {
	return strings.Join(eventFields(s, typ, "detail"), " | ")
}
