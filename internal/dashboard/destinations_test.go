package dashboard_test

import (
	"context"
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

// TestDestinations_EachTenantSeesItsOwn: shaping is kept per process, for
// every tenant together, but a tenant's admin sees only the destinations
// its own sends went to — on the dashboard's page and through
// GET /v1/admin/destinations — and never another tenant's.
func TestDestinations_EachTenantSeesItsOwn(t *testing.T) {
	dns := dnstest.Start(t, "a.test. MX 10 mx.a.test.", "mx.a.test. A 127.0.0.1", "b.test. MX 10 mx.b.test.", "mx.b.test. A 127.0.0.1")
	env := sendoncetest.Start(t, sendoncetest.Options{MX: true, DNSResolver: dns.Addr()})
	all := []core.Scope{core.ScopeSend, core.ScopeRead, core.ScopeAdmin}
	_, keyA := env.NewKey(t, app.NewKeyParams{Name: "a", Tenant: "tenant-a", Scopes: all})
	_, keyB := env.NewKey(t, app.NewKeyParams{Name: "b", Tenant: "tenant-b", Scopes: all})
	for i, c := range []struct{ key, tenant, to string }{{keyA, "tenant-a", "ann@a.test"}, {keyB, "tenant-b", "bob@b.test"}} {
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: c.key, IdemKey: "dest-" + c.to,
			Body: sendoncetest.Mail(c.to, "hello")})
		if r.Status != http.StatusOK {
			t.Fatalf("send %d: %d %s", i, r.Status, r.Body)
		}
		id := r.JSON(t)["id"].(string)
		var status core.Status
		for deadline := time.Now().Add(20 * time.Second); status != core.StatusDelivered && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			s, err := env.Server.Store.Send(context.Background(), c.tenant, id)
			if err != nil {
				t.Fatalf("send %d: %v", i, err)
			}
			status = s.Status
		}
		if status != core.StatusDelivered {
			t.Fatalf("send %d: %s, want delivered", i, status)
		}
	}
	for _, c := range []struct{ key, mine, theirs string }{{keyA, "mx.a.test", "mx.b.test"}, {keyB, "mx.b.test", "mx.a.test"}, {env.AdminKey, "", "mx."}} {
		r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/admin/destinations", Key: c.key})
		if r.Status != http.StatusOK || !strings.Contains(string(r.Body), c.mine) || strings.Contains(string(r.Body), c.theirs) {
			t.Errorf("GET /v1/admin/destinations: %d %s; want %q and not %q", r.Status, r.Body, c.mine, c.theirs)
		}
		br := newBrowser(t, env)
		br.signIn(c.key)
		p := br.get("/ui/destinations")
		if p.Status != http.StatusOK || !strings.Contains(p.Body, c.mine) || strings.Contains(p.Body, c.theirs) {
			t.Errorf("/ui/destinations: %d; want %q and not %q:\n%s", p.Status, c.mine, c.theirs, p.Body)
		}
	}
}
