package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/dnscheck"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestDomainCheck_SenderRules: a running server's domain check has the
// bulk sender rules section, judged with the server's settings: SPF of
// --bounce-domain, --public-url for the one-click links, the
// --egress-source addresses' reverse DNS, and STARTTLS of the
// --tls-receivers' exchangers reached at --mx-port and verified with
// --tls-ca. Adding and verifying the domain (the verification needs only
// DKIM) connects to no receiver; the check connects once. On both
// databases.
func TestDomainCheck_SenderRules(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		ca := smtptest.NewCA(t)
		rx := smtptest.Start(t, smtptest.Options{Addr: "127.0.0.2:0", TLSConfig: ca.Server(t, "mx.rx.test")})
		caFile := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
			t.Fatal(err)
		}
		dns := dnstest.Start(t,
			"send.test. MX 10 mx.send.test.", "mx.send.test. A 192.0.2.25",
			`send.test. TXT "v=spf1 ip4:127.0.0.5 -all"`,
			`bounces.send.test. TXT "v=spf1 ip4:127.0.0.5 -all"`,
			"5.0.0.127.in-addr.arpa. PTR out.send.test.", "out.send.test. A 127.0.0.5",
			"rx.test. MX 10 mx.rx.test.", "mx.rx.test. A 127.0.0.2",
		)
		env := sendoncetest.Start(t, sendoncetest.Options{DNSResolver: dns.Addr(), BounceDomain: "bounces.send.test",
			PublicURL: "https://mail.send.test", EgressSources: []string{"a=127.0.0.5,ehlo=out.send.test"},
			TLSReceivers: []string{"rx.test"}, MXPort: rx.Port, TLSCA: caFile, NoWorkers: true, Backend: backend})
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/domains", Key: env.AdminKey, IdemKey: "d1",
			Body: map[string]any{"domain": "send.test"}}); r.Status != http.StatusCreated {
			t.Fatalf("add domain: %d %s", r.Status, r.Body)
		}
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/domains/send.test/verify", Key: env.AdminKey, IdemKey: "v1"}); r.Status != http.StatusOK {
			t.Fatalf("verify: %d %s", r.Status, r.Body)
		}
		if n := rx.Connections(); n != 0 {
			t.Errorf("adding and verifying the domain connected to the receivers %d times", n)
		}
		r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/domains/send.test/check", Key: env.AdminKey})
		var rep struct {
			Findings []struct{ Check, Rule, Level, Message, Fix string }
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &rep) != nil {
			t.Fatalf("check: %d %s", r.Status, r.Body)
		}
		want := []struct{ rule, level, text string }{
			{"spf", "ok", "bounces.send.test, the envelope sender's domain (--bounce-domain), publishes an SPF record"},
			{"alignment", "ok", "aligns with the SPF domain bounces.send.test (relaxed) and with the DKIM domain d=send.test"},
			{"dmarc", "error", "No DMARC record is published for send.test"},
			{"dkim", "error", "do not verify"}, // the key is not published
			{"ptr", "ok", "Egress source a (127.0.0.5) has forward-confirmed reverse DNS"},
			{"tls", "ok", "rx.test's exchanger mx.rx.test (127.0.0.2) offers STARTTLS"},
			{"one-click", "ok", "<https://mail.send.test/u/TOKEN>"},
		}
		for _, w := range want {
			found := false
			for _, f := range rep.Findings {
				found = found || f.Check == "bulk" && f.Rule == w.rule && f.Level == w.level && strings.Contains(f.Message, w.text)
			}
			if !found {
				t.Errorf("no bulk %s %s finding saying %q:\n%s", w.rule, w.level, w.text, r.Body)
			}
		}
		if n := rx.Connections(); n != 1 {
			t.Errorf("the check connected to the receiver %d times, want 1", n)
		}
		// The probe's outcome is the receiver's, not the domain's: checks
		// within its time ask the receiver nothing more.
		env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/domains/send.test/check", Key: env.AdminKey})
		if n := rx.Connections(); n != 1 {
			t.Errorf("a second check at once connected %d times in all, want the first probe's 1", n)
		}
		env.Clock.Advance(dnscheck.DefaultProbeTTL)
		env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/domains/send.test/check", Key: env.AdminKey})
		if n := rx.Connections(); n != 2 {
			t.Errorf("a check past the probe's time connected %d times in all, want 2", n)
		}
	})
}
