package dashboard_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestDomainPage_CheckShowsTheSenderRules: the domain page's check lists
// the bulk sender rules section's findings, each with its rule.
func TestDomainPage_CheckShowsTheSenderRules(t *testing.T) {
	dns := dnstest.Start(t, "page.test. MX 10 mx.page.test.", "mx.page.test. A 192.0.2.25")
	env := sendoncetest.Start(t, sendoncetest.Options{DNSResolver: dns.Addr(), NoWorkers: true})
	if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/domains", Key: env.AdminKey, IdemKey: "d1",
		Body: map[string]any{"domain": "page.test"}}); r.Status != http.StatusCreated {
		t.Fatalf("add domain: %d %s", r.Status, r.Body)
	}
	b := newBrowser(t, env)
	b.signIn(env.AdminKey)
	b.get("/ui/domains/page.test")
	p := b.post("/ui/domains/page.test/check", nil)
	if p.Status != http.StatusOK {
		t.Fatalf("check: %d %s", p.Status, p.Body)
	}
	for _, want := range []string{"bulk · dmarc · error", "No DMARC record is published for page.test", "bulk · one-click · warning"} {
		if !strings.Contains(p.Body, want) {
			t.Errorf("the page does not show %q:\n%s", want, p.Body)
		}
	}
}
