package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestDomainCheck_EgressSources: a running server's domain check looks at
// the --egress-source addresses — reverse DNS forward-confirmed and named
// in EHLO, and SPF covering them.
func TestDomainCheck_EgressSources(t *testing.T) {
	dns := dnstest.Start(t,
		`send.test. TXT "v=spf1 ip4:127.0.0.5 -all"`,
		"5.0.0.127.in-addr.arpa. PTR out.send.test.", "out.send.test. A 127.0.0.5",
	)
	env := sendoncetest.Start(t, sendoncetest.Options{DNSResolver: dns.Addr(), HELOName: "mta.send.test",
		EgressSources: []string{"a=127.0.0.5,ehlo=out.send.test", "b=127.0.0.6"}})
	if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/domains", Key: env.AdminKey, IdemKey: "d1",
		Body: map[string]any{"domain": "send.test"}}); r.Status != http.StatusCreated && r.Status != http.StatusOK {
		t.Fatalf("add domain: %d %s", r.Status, r.Body)
	}
	r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/domains/send.test/check", Key: env.AdminKey})
	if r.Status != http.StatusOK {
		t.Fatalf("check: %d %s", r.Status, r.Body)
	}
	body := string(r.Body)
	for _, want := range []string{
		"Egress source a (127.0.0.5): reverse DNS out.send.test is forward-confirmed",
		"Egress source b (127.0.0.6) has no PTR record",
		`SPF gives fail for the relay (127.0.0.6)`, // SPF does not cover b
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the check does not say %q:\n%s", want, body)
		}
	}
}
