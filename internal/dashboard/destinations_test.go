package dashboard_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestDashboard_Destinations: after mx delivered to an exchanger, the
// admin's destinations page shows its site with the shaping rule and the
// delivery counted; a read key neither sees the menu entry nor the page.
func TestDashboard_Destinations(t *testing.T) {
	dns := dnstest.Start(t, "dest.test. MX 10 mx.dest.test.", "mx.dest.test. A 127.0.0.1")
	env := sendoncetest.Start(t, sendoncetest.Options{MX: true, DNSResolver: dns.Addr()})
	br := newBrowser(t, env)
	br.signIn(env.AdminKey)
	if p := br.get("/ui/destinations"); p.Status != http.StatusOK || !strings.Contains(p.Body, "No destinations yet") {
		t.Fatalf("before any mx delivery: %d %s", p.Status, p.Body)
	}
	r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: env.AdminKey, IdemKey: "dest-1",
		Body: sendoncetest.Mail("ann@dest.test", "hello")})
	if r.Status != http.StatusOK {
		t.Fatalf("send: %d %s", r.Status, r.Body)
	}
	env.WaitStatus(t, r.JSON(t)["id"].(string), 20*time.Second, core.StatusDelivered)
	p := br.get("/ui/destinations")
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "mx.dest.test") || !strings.Contains(p.Body, "<td>1</td>") {
		t.Fatalf("after a delivery the page lacks the site or its count: %d %s", p.Status, p.Body)
	}

	_, reader := env.NewKey(t, app.NewKeyParams{Name: "reader", Scopes: []core.Scope{core.ScopeRead}})
	rb := newBrowser(t, env)
	rb.signIn(reader)
	if p := rb.get("/"); strings.Contains(p.Body, `href="/ui/destinations"`) {
		t.Error("a read key sees the destinations menu entry")
	}
	if p := rb.get("/ui/destinations"); p.Status != http.StatusForbidden && p.Status != http.StatusNotFound {
		t.Errorf("a read key opened the destinations page: %d", p.Status)
	}
}
