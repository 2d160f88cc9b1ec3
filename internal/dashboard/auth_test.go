package dashboard_test

// Authorization of every dashboard route against a whole running instance
// (real SQLite and PostgreSQL, sendoncetest.EachBackend): no session
// redirects to sign-in, another tenant's things are 404, a read key may
// look but not act, and a form without its CSRF token changes nothing.

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/dashboard"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// fixture is one tenant's things, one of each kind a route names.
type fixture struct {
	send, pending, unknown, inbox, key, domain, template string
	// webhook subscribes to email.sent, so the send has a delivery
	// (event); suppression is suppressed's entry.
	webhook, event, suppression string
	// thread holds received, a received message with attachment.
	thread, received, attachment string
	// draft is an unsent draft to ann@example.com.
	draft string
}

const (
	fixtureEndpoint   = "http://127.0.0.1:9/fixture-hook"
	fixtureSuppressed = "gone@fixture.example"
)

// makeFixture creates, in tenant "default", a send (delivered to the
// capture inbox), a pending one, an unknown one, a key, a domain and a
// template.
func makeFixture(t *testing.T, env *sendoncetest.Env) fixture {
	t.Helper()
	ctx := context.Background()
	svc := env.Server.Service
	f := fixture{template: "welcome", domain: "default-tenant.example", webhook: "wh_fixture"}
	// Stored as it is (no endpoint check: the fixture's endpoint is on
	// 127.0.0.1), before the sends, so that their events are delivered.
	err := env.Server.Store.InTx(ctx, func(tx core.Tx) error {
		now := env.Clock.Now()
		return tx.InsertWebhook(ctx, &core.Webhook{ID: f.webhook, Tenant: "default", Endpoint: fixtureEndpoint, Events: []string{"email.sent"},
			Status: core.WebhookEnabled, Secret: []byte("whsec_fixture"), CreatedAt: now, UpdatedAt: now})
	})
	if err != nil {
		t.Fatalf("fixture webhook: %v", err)
	}
	f.send = apiSend(t, env, env.AdminKey, "Hello", "Hello <b>there</b>")
	_, approvalSecret := env.NewKey(t, app.NewKeyParams{Name: "needs-approval", Scopes: []core.Scope{core.ScopeSend}, RequiresApproval: true})
	f.pending = apiSend(t, env, approvalSecret, "Pending", "pending")
	f.unknown = apiSend(t, env, approvalSecret, "Unknown", "will be unknown")
	env.Exec(t, "UPDATE sends SET status = 'unknown' WHERE id = ?", f.unknown)
	k, _ := env.NewKey(t, app.NewKeyParams{Name: "victim", Scopes: []core.Scope{core.ScopeRead}})
	f.key = k.ID
	err = env.Server.Store.InTx(ctx, func(tx core.Tx) error {
		sup, _, err := svc.AddManualSuppression(ctx, tx, "default", fixtureSuppressed, "fixture")
		if err != nil {
			return err
		}
		f.suppression = sup.ID
		if _, err := svc.PutTemplate(ctx, tx, &core.Template{Tenant: "default", ID: f.template, Subject: "Hi {{.name}}", Text: "Hello {{.name}}"}); err != nil {
			return err
		}
		d, err := svc.PrepareDomain(app.AddDomainParams{Tenant: "default", Domain: f.domain})
		if err != nil {
			return err
		}
		return svc.AddDomain(ctx, tx, d)
	})
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	_, rcv := receiveFixture(t, env, "support@recv.test", receivedMail, core.ReceivedAuth{})
	f.thread, f.received = rcv.ThreadID, rcv.ID
	m, err := env.Server.Store.ReceivedMessage(ctx, "default", rcv.ID)
	if err != nil || len(m.Attachments) != 1 {
		t.Fatalf("fixture received message: %v, %v", m, err)
	}
	f.attachment = m.Attachments[0].ID
	dr := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/drafts", Key: env.AdminKey, IdemKey: "fixture-draft",
		Body: map[string]any{"to": "ann@example.com", "subject": "Draft", "text": "unsent"}})
	if dr.Status != http.StatusOK {
		t.Fatalf("fixture draft: %d %s", dr.Status, dr.Body)
	}
	f.draft = dr.JSON(t)["id"].(string)
	deadline := time.Now().Add(20 * time.Second)
	for {
		list, err := env.Server.Store.ListInbox(ctx, "default", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) > 0 {
			f.inbox = list[0].ID
		}
		ds, _, err := env.Server.Store.ListWebhookDeliveries(ctx, "default", f.webhook, core.WebhookPage{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) > 0 {
			f.event = ds[0].EventID
		}
		if f.inbox != "" && f.event != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the send never reached the capture inbox (%q) or its webhook (%q)", f.inbox, f.event)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return f
}

// visit opens a route's page (its pattern filled by path) in br's
// session; a POST sends the form the path takes.
func (f fixture) visit(br *browser, pattern string) (method, path string, p page) {
	method, path = f.path(pattern)
	if method == "POST" {
		return method, path, br.post(path, f.form(path))
	}
	return method, path, br.get(path)
}

// path fills a route's pattern with the fixture's ids.
func (f fixture) path(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	path = strings.TrimSuffix(path, "{$}")
	// The {id} of a page under one of these prefixes; else a send's (or,
	// for a confirmation, the pending send's).
	ids := []struct{ prefix, id string }{
		{"/ui/inbox/", f.inbox}, {"/ui/mail/", f.thread}, {"/ui/received/", f.received}, {"/ui/keys/", f.key},
		{"/ui/templates/", f.template}, {"/ui/webhooks/", f.webhook}, {"/ui/suppressions/", f.suppression}, {"/ui/drafts/", f.draft},
	}
	id, found := f.send, false
	for _, p := range ids {
		if !found && strings.HasPrefix(path, p.prefix) {
			id, found = p.id, true
		}
	}
	if !found && strings.HasSuffix(path, "/confirm") {
		id = f.pending
		path += "?action=approve"
	}
	path = strings.NewReplacer("{id}", id, "{event}", f.event, "{domain}", f.domain, "{file}", "app.css", "{att}", f.attachment).Replace(path)
	return method, path
}

// form is a valid body for each POST route, so that only the check under
// test can refuse it.
func (f fixture) form(path string) url.Values {
	switch {
	case strings.HasSuffix(path, "/action"):
		return url.Values{"action": {"approve"}}
	case path == "/ui/keys":
		return url.Values{"name": {"made"}, "scope": {"read"}}
	case strings.HasPrefix(path, "/ui/templates/"):
		return url.Values{"subject": {"s"}, "text": {"t"}, "do": {"save"}}
	case path == "/ui/webhooks":
		return url.Values{"endpoint": {"https://hooks.example.com/x"}, "event": {"email.sent"}}
	case strings.HasSuffix(path, "/status"):
		return url.Values{"status": {"disabled"}}
	case path == "/ui/suppressions":
		return url.Values{"email": {"new@fixture.example"}}
	case strings.HasSuffix(path, "/change"):
		return url.Values{"do": {"read"}}
	case strings.HasSuffix(path, "/reply"):
		return url.Values{"text": {"fixture reply"}, "nonce": {app.NewID("n")}}
	case strings.HasPrefix(path, "/ui/drafts/") && !strings.HasSuffix(path, "/send"):
		return url.Values{"to": {"ann@example.com"}, "subject": {"Draft"}, "text": {"edited"}}
	}
	return url.Values{}
}

func TestDashboard_NoSessionRedirectsToSignIn(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		f := makeFixture(t, env)
		anon := newBrowser(t, env)
		for _, rt := range dashboard.Routes() {
			method, path := f.path(rt.Pattern)
			p := anon.do(method, path, f.form(path))
			if rt.Scope == "" {
				if p.Status == http.StatusSeeOther && strings.HasPrefix(p.Location, "/ui/signin") {
					t.Errorf("%s %s: the sign-in page itself redirects to sign-in", method, path)
				}
				continue
			}
			if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, "/ui/signin?next=") {
				t.Errorf("%s %s without a session: %d to %q, want 303 to /ui/signin", method, path, p.Status, p.Location)
			}
		}
		if s := env.Server.Store; true {
			got, err := s.Send(context.Background(), "default", f.pending)
			if err != nil || got.Status != core.StatusPendingApproval {
				t.Errorf("after the anonymous POSTs the pending send is %v (%v), want still pending_approval", got.Status, err)
			}
		}
	})
}

func TestDashboard_OtherTenantIsNotFound(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		f := makeFixture(t, env)
		// Send too: the Mail pages' changes need it, and it is their 404
		// under test, not their 403.
		_, other := env.NewKey(t, app.NewKeyParams{Name: "other", Tenant: "other", Scopes: []core.Scope{core.ScopeRead, core.ScopeSend, core.ScopeAdmin}})
		br := newBrowser(t, env)
		br.signIn(other)
		br.get("/") // a CSRF token of this session
		n := 0
		for _, rt := range dashboard.Routes() {
			if !strings.Contains(rt.Pattern, "{id}") && !strings.Contains(rt.Pattern, "{domain}") {
				continue
			}
			if strings.HasPrefix(rt.Pattern, "POST /ui/templates/") || rt.Pattern == "GET /ui/templates/{id}" {
				continue // a template id is the tenant's own name: tested below
			}
			n++
			method, path, p := f.visit(br, rt.Pattern)
			if p.Status != http.StatusNotFound {
				t.Errorf("%s %s of another tenant: %d, want 404", method, path, p.Status)
			}
			if strings.Contains(p.Body, "Hello <b>there</b>") || strings.Contains(p.Body, "victim") || strings.Contains(p.Body, "order is late") {
				t.Errorf("%s %s shows another tenant's data", method, path)
			}
		}
		if n < 10 {
			t.Fatalf("only %d routes with ids were tried", n)
		}
		// Lists show only the tenant's own things.
		for _, path := range []string{"/ui/sends", "/ui/inbox", "/ui/approvals", "/ui/keys", "/ui/domains", "/ui/templates", "/ui/sends?q=rcpt",
			"/ui/webhooks", "/ui/suppressions", "/ui/suppressions?email=" + fixtureSuppressed, "/ui/inbound", "/ui/mail", "/ui/mail?folder=archive"} {
			p := br.get(path)
			if p.Status != http.StatusOK {
				t.Errorf("GET %s of tenant other: %d", path, p.Status)
			}
			leaks := []string{f.send, f.pending, f.inbox, "victim", f.domain, ">" + f.template + "<", fixtureEndpoint, f.thread, "support@recv.test", f.suppression, fixtureSuppressed}
			if strings.Contains(path, "?email=") { // the search form shows what was searched for
				leaks = leaks[:len(leaks)-1]
				if !strings.Contains(p.Body, "is not on the suppression list") {
					t.Errorf("GET %s of tenant other finds tenant default's entry", path)
				}
			}
			for _, leak := range leaks {
				if strings.Contains(p.Body, leak) {
					t.Errorf("%s of tenant other shows %q of tenant default", path, leak)
				}
			}
		}
		// The other tenant's template page is a new, empty template of its own.
		if p := br.get("/ui/templates/" + f.template); strings.Contains(p.Body, "Hello {{.name}}") {
			t.Errorf("tenant other sees tenant default's template text")
		}
		if got, _ := env.Server.Store.Send(context.Background(), "default", f.pending); got.Status != core.StatusPendingApproval {
			t.Errorf("another tenant's approve changed the send to %s", got.Status)
		}
		if k, _ := env.Server.Store.APIKey(context.Background(), f.key); k.RevokedAt != nil {
			t.Errorf("another tenant revoked the key")
		}
		f.unchanged(t, env, "another tenant's POSTs")
	})
}

func TestDashboard_ReadKeyLooksButDoesNotAct(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		f := makeFixture(t, env)
		_, reader := env.NewKey(t, app.NewKeyParams{Name: "reader", Scopes: []core.Scope{core.ScopeRead}})
		br := newBrowser(t, env)
		br.signIn(reader)
		for _, path := range []string{"/ui/sends/" + f.pending, "/ui/sends/" + f.unknown, "/ui/domains/" + f.domain, "/ui/templates/" + f.template, "/",
			"/ui/webhooks", "/ui/webhooks/" + f.webhook, "/ui/webhooks/" + f.webhook + "/events/" + f.event, "/ui/suppressions"} {
			p := br.get(path)
			if p.Status != http.StatusOK {
				t.Fatalf("GET %s with a read key: %d", path, p.Status)
			}
			for _, admin := range []string{"/confirm?action=", "Check DNS now", `value="save"`, `data-preview=`, `value="preview"`, `href="/ui/keys"`, `href="/ui/audit"`, `href="/ui/inbound"`,
				`method="post" action="/ui/webhooks"`, `method="post" action="/ui/suppressions"`, "/status\"", "/rotate", "/delete", "/replay", "/remove", "Disable"} {
				if strings.Contains(p.Body, admin) {
					t.Errorf("GET %s with a read key shows the admin action %q", path, admin)
				}
			}
		}
		// The table cannot lower a change's scope unnoticed: every POST but
		// the session routes needs admin (the template preview too: it
		// renders text the caller posts), but the Mail pages' changes,
		// which need send as the API's thread changes and replies do.
		notAdmin := map[string]core.Scope{"POST /ui/signin": "", "POST /ui/signout": core.ScopeRead,
			"POST /ui/mail/{id}/change": core.ScopeSend, "POST /ui/received/{id}/reply": core.ScopeSend,
			"POST /ui/drafts/{id}": core.ScopeSend, "POST /ui/drafts/{id}/send": core.ScopeSend}
		for _, rt := range dashboard.Routes() {
			want, listed := notAdmin[rt.Pattern]
			if !listed {
				want = core.ScopeAdmin
			}
			if strings.HasPrefix(rt.Pattern, "POST ") && rt.Scope != string(want) {
				t.Errorf("%s changes something with scope %q, want %q", rt.Pattern, rt.Scope, want)
			}
		}
		for _, rt := range dashboard.Routes() {
			if rt.Scope != string(core.ScopeAdmin) && rt.Scope != string(core.ScopeSend) {
				continue
			}
			method, path, p := f.visit(br, rt.Pattern)
			if p.Status != http.StatusForbidden {
				t.Errorf("%s %s with a read key: %d, want 403", method, path, p.Status)
			}
		}
		if got, _ := env.Server.Store.Send(context.Background(), "default", f.pending); got.Status != core.StatusPendingApproval {
			t.Errorf("a read key's approve changed the send to %s", got.Status)
		}
		f.unchanged(t, env, "a read key's POSTs")
		// A send-only key cannot sign in at all.
		_, sender := env.NewKey(t, app.NewKeyParams{Name: "sender", Scopes: []core.Scope{core.ScopeSend}})
		s := newBrowser(t, env)
		s.get("/ui/signin")
		if p := s.post("/ui/signin", url.Values{"key": {sender}}); p.Status != http.StatusForbidden {
			t.Errorf("sign-in with a send-only key: %d, want 403", p.Status)
		}
	})
}

func TestDashboard_PostWithoutCSRFChangesNothing(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		f := makeFixture(t, env)
		br := newBrowser(t, env)
		br.signIn(env.AdminKey)
		good := br.csrf
		for _, rt := range dashboard.Routes() {
			method, path := f.path(rt.Pattern)
			if method != "POST" || rt.Scope == "" {
				continue
			}
			for _, token := range []string{"", "wrong-" + good} {
				form := f.form(path)
				form.Set("csrf", token)
				if p := br.do("POST", path, form); p.Status != http.StatusForbidden {
					t.Errorf("POST %s with CSRF token %q: %d, want 403", path, token, p.Status)
				}
			}
		}
		ctx := context.Background()
		if got, _ := env.Server.Store.Send(ctx, "default", f.pending); got.Status != core.StatusPendingApproval {
			t.Errorf("a POST without CSRF changed the send to %s", got.Status)
		}
		if keys, _ := env.Server.Service.TenantKeys(ctx, "default"); len(keys) != 3 {
			t.Errorf("after POSTs without CSRF the tenant has %d keys, want 3", len(keys))
		}
		f.unchanged(t, env, "POSTs without CSRF")
		// The sign-in form has its own token.
		anon := newBrowser(t, env)
		if p := anon.do("POST", "/ui/signin", url.Values{"key": {env.AdminKey}}); p.Status != http.StatusForbidden {
			t.Errorf("sign-in without the form's token: %d, want 403", p.Status)
		}
		// The same POST with the token works: the refusals above were the token's.
		br.csrf = good
		if p := br.post("/ui/sends/"+f.pending+"/action", url.Values{"action": {"approve"}}); p.Status != http.StatusSeeOther {
			t.Errorf("approve with the token: %d %s", p.Status, p.Body)
		}
	})
}

func TestDashboard_SessionEnds(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		signedOut := func(br *browser, why string) {
			t.Helper()
			if p := br.get("/ui/sends"); p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, "/ui/signin") {
				t.Errorf("%s: GET /ui/sends is %d to %q, want the sign-in page", why, p.Status, p.Location)
			}
		}
		br := newBrowser(t, env)
		br.signIn(env.AdminKey)
		if p := br.post("/ui/signout", nil); p.Status != http.StatusSeeOther {
			t.Fatalf("sign out: %d", p.Status)
		}
		signedOut(br, "after sign-out")

		k, secret := env.NewKey(t, app.NewKeyParams{Name: "soon-revoked", Scopes: []core.Scope{core.ScopeRead}})
		br = newBrowser(t, env)
		br.signIn(secret)
		if err := env.Server.Service.RevokeKey(context.Background(), k.ID); err != nil {
			t.Fatal(err)
		}
		signedOut(br, "after its key was revoked")

		br = newBrowser(t, env)
		br.signIn(env.AdminKey)
		env.Clock.Advance(dashboard.DefaultIdleTimeout - time.Minute)
		if p := br.get("/ui/sends"); p.Status != http.StatusOK {
			t.Fatalf("a session used within its idle timeout: %d", p.Status)
		}
		env.Clock.Advance(dashboard.DefaultIdleTimeout + time.Second)
		signedOut(br, "idle past the timeout")

		br = newBrowser(t, env)
		br.signIn(env.AdminKey)
		for range 25 { // used every 29 minutes, never idle: the absolute lifetime ends it
			env.Clock.Advance(29 * time.Minute)
			br.get("/")
		}
		signedOut(br, "past the absolute lifetime")

		if n := env.QueryInt(t, "SELECT count(*) FROM dashboard_sessions WHERE id LIKE 'so_%'"); n != 0 {
			t.Errorf("%d sessions are stored under the cookie's value, not its hash", n)
		}
	})
}

func TestDashboard_CookieAndHeaders(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{})
	br := newBrowser(t, env)
	br.get("/ui/signin")
	p := br.post("/ui/signin", url.Values{"key": {env.AdminKey}})
	var c *http.Cookie
	for _, raw := range p.Header.Values("Set-Cookie") {
		if hc, err := http.ParseSetCookie(raw); err == nil && hc.Name == "sendonce_session" && hc.Value != "" {
			c = hc
		}
	}
	if c == nil {
		t.Fatal("sign-in set no session cookie")
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Errorf("session cookie %+v, want HttpOnly, SameSite=Strict, Path=/", c)
	}
	if strings.Contains(p.Location, "so_") {
		t.Errorf("the redirect after sign-in carries the secret: %q", p.Location)
	}
	page := br.get("/ui/sends")
	csp := page.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(page.Body, "<script>") || strings.Contains(page.Body, " style=") {
		t.Errorf("the page relies on inline script or style (CSP %q)", csp)
	}
	if page.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", page.Header.Get("Cache-Control"))
	}
	if strings.Contains(page.Body, env.AdminKey) {
		t.Error("a page shows the signed-in key's secret")
	}
	// A redirect target after sign-in stays on this site.
	br2 := newBrowser(t, env)
	br2.get("/ui/signin?next=//evil.example/")
	if p := br2.post("/ui/signin", url.Values{"key": {env.AdminKey}, "next": {"//evil.example/"}}); p.Location != "/" {
		t.Errorf("next=//evil.example/ redirected to %q, want /", p.Location)
	}
}

// TestDashboard_AgentKeySeesOnlyItsOwnSends: as in the API, an agent key
// lists and opens only the sends it created.
func TestDashboard_AgentKeySeesOnlyItsOwnSends(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		others := apiSend(t, env, env.AdminKey, "Not the agent's", "<p>x</p>")
		_, agent := env.NewKey(t, app.NewKeyParams{Name: "agent", Agent: true, Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}})
		own := apiSend(t, env, agent, "The agent's own", "<p>y</p>")
		br := newBrowser(t, env)
		br.signIn(agent)
		for _, path := range []string{"/ui/sends", "/ui/sends?q=snd_", "/ui/sends?q=" + others, "/"} {
			p := br.get(path)
			if strings.Contains(p.Body, `id="row-`+others) || strings.Contains(p.Body, "Not the agent") {
				t.Errorf("GET %s with an agent key shows another key's send", path)
			}
			if path == "/ui/sends" && !strings.Contains(p.Body, `id="row-`+own) {
				t.Errorf("GET %s with an agent key lacks its own send", path)
			}
		}
		if p := br.get("/ui/sends/" + others); p.Status != http.StatusNotFound {
			t.Errorf("an agent key opening another key's send: %d, want 404", p.Status)
		}
		if p := br.get("/ui/sends/" + own); p.Status != http.StatusOK {
			t.Errorf("an agent key opening its own send: %d, want 200", p.Status)
		}
	})
}
