package httpapi_test

// Resend's management routes (/domains, /api-keys, /templates) driven by
// the official Resend Go SDK with only its base URL changed, on SQLite and
// PostgreSQL.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	resend "github.com/resend/resend-go/v3"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

func resendClientWith(t *testing.T, env *sendoncetest.Env, secret string) *resend.Client {
	t.Helper()
	c := resend.NewClient(secret)
	u, err := url.Parse(env.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	c.BaseURL = u
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// zoneOf turns the records a create call returned into zone-file lines, as
// their owner would publish them (TXT values cut into 255-byte strings).
func zoneOf(domain string, recs []resend.Record) []string {
	var zone []string
	for _, r := range recs {
		name := r.Name + "." + domain + "."
		if r.Name == "@" {
			name = domain + "."
		}
		line := name + " " + r.Type
		for v := r.Value; v != ""; {
			n := min(len(v), 255)
			line += fmt.Sprintf(" %q", v[:n])
			v = v[n:]
		}
		zone = append(zone, line)
	}
	return zone
}

func TestResendSDK_DomainsVerifiedAgainstLoopbackDNS(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		empty := dnstest.Start(t)
		first := sendoncetest.Start(t, sendoncetest.Options{Backend: b, NoWorkers: true, DNSResolver: empty.Addr()})
		c := resendClientWith(t, first, first.AdminKey)
		ctx := testCtx(t)

		created, err := c.Domains.CreateWithContext(ctx, &resend.CreateDomainRequest{Name: "Acme.Test"})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if created.Id != "acme.test" || created.Name != "acme.test" || created.Status != "not_started" || len(created.Records) != 3 {
			t.Fatalf("created %+v", created)
		}
		kinds := map[string]resend.Record{}
		for _, r := range created.Records {
			kinds[r.Record] = r
		}
		if k := kinds["DKIM"]; k.Name != "s1._domainkey" || k.Type != "TXT" || !strings.HasPrefix(k.Value, "v=DKIM1;") || k.Ttl != "Auto" {
			t.Errorf("DKIM record %+v", k)
		}
		if s := kinds["SPF"]; s.Name != "@" || !strings.HasPrefix(s.Value, "v=spf1") {
			t.Errorf("SPF record %+v", s)
		}
		if d := kinds["DMARC"]; d.Name != "_dmarc" || !strings.HasPrefix(d.Value, "v=DMARC1") {
			t.Errorf("DMARC record %+v", d)
		}
		if _, err := c.Domains.CreateWithContext(ctx, &resend.CreateDomainRequest{Name: "acme.test"}); err == nil {
			t.Error("a second create of the domain succeeded")
		}

		list, err := c.Domains.ListWithContext(ctx)
		if err != nil || list.Object != "list" || len(list.Data) != 1 || list.Data[0].Id != "acme.test" || list.HasMore {
			t.Fatalf("list %+v %v", list, err)
		}
		if _, err := c.Domains.UpdateWithContext(ctx, "acme.test", &resend.UpdateDomainRequest{OpenTracking: true}); err == nil ||
			!strings.Contains(err.Error(), "does not track opens") {
			t.Errorf("update with open tracking: %v, want a refusal", err)
		}
		if _, err := c.Domains.UpdateWithContext(ctx, "acme.test", &resend.UpdateDomainRequest{}); err != nil {
			t.Errorf("update with nothing on: %v", err)
		}

		// Nothing published yet: the check fails.
		if ok, err := c.Domains.VerifyWithContext(ctx, "acme.test"); !ok || err != nil {
			t.Fatalf("verify: %v", err)
		}
		if got, err := c.Domains.GetWithContext(ctx, "acme.test"); err != nil || got.Status != "failed" {
			t.Fatalf("after verify without records: %+v %v", got, err)
		}
		first.Close()

		// Publish what create returned; the next check verifies.
		dns := dnstest.Start(t, zoneOf("acme.test", created.Records)...)
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, NoWorkers: true, DB: first.DB, DNSResolver: dns.Addr()})
		c = resendClientWith(t, env, env.AdminKey)
		if ok, err := c.Domains.VerifyWithContext(ctx, "acme.test"); !ok || err != nil {
			t.Fatalf("verify: %v", err)
		}
		got, err := c.Domains.GetWithContext(ctx, "acme.test")
		if err != nil || got.Status != "verified" || got.Object != "domain" || len(got.Records) != 3 || got.Records[0].Status != "verified" {
			t.Fatalf("after verify with records: %+v %v", got, err)
		}

		if ok, err := c.Domains.RemoveWithContext(ctx, "acme.test"); !ok || err != nil {
			t.Fatalf("remove: %v", err)
		}
		if _, err := c.Domains.GetWithContext(ctx, "acme.test"); err == nil {
			t.Error("get after remove succeeded")
		}
		r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/domains/acme.test", Key: env.AdminKey})
		if r.Status != http.StatusNotFound || r.JSON(t)["name"] != "not_found" {
			t.Errorf("get after remove: %d %s", r.Status, r.Body)
		}
	})
}

func TestResendSDK_APIKeys(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{NoWorkers: true}, func(t *testing.T, env *sendoncetest.Env) {
		admin := resendClientWith(t, env, env.AdminKey)
		ctx := testCtx(t)
		if _, err := admin.Domains.CreateWithContext(ctx, &resend.CreateDomainRequest{Name: "acme.test"}); err != nil {
			t.Fatalf("create domain: %v", err)
		}
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: "mb-1",
			Body: map[string]any{"id": "acme", "address": "hello@acme.test"}}); r.Status != http.StatusCreated {
			t.Fatalf("mailbox: %d %s", r.Status, r.Body)
		}

		full, err := admin.ApiKeys.CreateWithContext(ctx, &resend.CreateApiKeyRequest{Name: "ci"})
		if err != nil || full.Id == "" || !strings.HasPrefix(full.Token, "so_") {
			t.Fatalf("create full_access: %+v %v", full, err)
		}
		if _, err := resendClientWith(t, env, full.Token).Domains.ListWithContext(ctx); err != nil {
			t.Errorf("the full_access key cannot list domains: %v", err)
		}
		sending, err := admin.ApiKeys.CreateWithContext(ctx, &resend.CreateApiKeyRequest{Name: "app", Permission: "sending_access", DomainId: "acme.test"})
		if err != nil {
			t.Fatalf("create sending_access: %v", err)
		}
		if _, err := admin.ApiKeys.CreateWithContext(ctx, &resend.CreateApiKeyRequest{Name: "x", Permission: "sending_access", DomainId: "nowhere.test"}); err == nil {
			t.Error("a key for a domain the tenant does not have was created")
		}

		// The sending key sends from the domain's mailbox, and nothing else.
		sc := resendClientWith(t, env, sending.Token)
		if _, err := sc.Emails.SendWithContext(ctx, &resend.SendEmailRequest{From: "hello@acme.test", To: []string{"ada@example.com"}, Subject: "Hi", Text: "x"}); err != nil {
			t.Errorf("send from the domain's mailbox: %v", err)
		}
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/emails", Key: sending.Token,
			Body: map[string]any{"from": "sender@example.com", "to": "ada@example.com", "subject": "Hi", "text": "x"}})
		if r.Status != http.StatusForbidden {
			t.Errorf("send from another mailbox: %d %s", r.Status, r.Body)
		}

		list, err := admin.ApiKeys.ListWithContext(ctx)
		if err != nil || len(list.Data) != 3 {
			t.Fatalf("list: %+v %v", list, err)
		}
		raw := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/api-keys", Key: env.AdminKey})
		if strings.Contains(string(raw.Body), "so_") || strings.Contains(string(raw.Body), "token") {
			t.Errorf("the list shows secrets: %s", raw.Body)
		}
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/api-keys", Key: env.AdminKey, IdemKey: "k-1",
			Body: map[string]any{"name": "x"}}); r.Status != http.StatusBadRequest || r.JSON(t)["name"] != "invalid_idempotency_key" {
			t.Errorf("create with an Idempotency-Key: %d %s", r.Status, r.Body)
		}

		if ok, err := admin.ApiKeys.RemoveWithContext(ctx, full.Id); !ok || err != nil {
			t.Fatalf("remove: %v", err)
		}
		if r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/domains", Key: full.Token}); r.Status != http.StatusUnauthorized {
			t.Errorf("a removed key: %d %s", r.Status, r.Body)
		}
		if _, err := admin.ApiKeys.RemoveWithContext(ctx, full.Id); err == nil {
			t.Error("a second remove succeeded")
		}
	})
}

// TestResendManage_Authorization: a sending_access key (scope send) gets
// 403 restricted_api_key on every management route, and a tenant sees and
// touches nothing of another's.
func TestResendManage_Authorization(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{NoWorkers: true}, func(t *testing.T, env *sendoncetest.Env) {
		ctx := testCtx(t)
		admin := resendClientWith(t, env, env.AdminKey)
		if _, err := admin.Domains.CreateWithContext(ctx, &resend.CreateDomainRequest{Name: "acme.test"}); err != nil {
			t.Fatal(err)
		}
		tpl, err := admin.Templates.CreateWithContext(ctx, &resend.CreateTemplateRequest{Name: "t", Subject: "s", Html: "<p>x</p>"})
		if err != nil {
			t.Fatal(err)
		}
		adminKey, err := env.Server.Service.TenantKeys(ctx, "default")
		if err != nil || len(adminKey) != 1 {
			t.Fatalf("keys: %v %v", adminKey, err)
		}
		sending, err := admin.ApiKeys.CreateWithContext(ctx, &resend.CreateApiKeyRequest{Name: "app", Permission: "sending_access"})
		if err != nil {
			t.Fatal(err)
		}
		routes := []struct{ method, path string }{
			{"POST", "/domains"}, {"GET", "/domains"}, {"GET", "/domains/acme.test"}, {"PATCH", "/domains/acme.test"},
			{"DELETE", "/domains/acme.test"}, {"POST", "/domains/acme.test/verify"},
			{"POST", "/api-keys"}, {"GET", "/api-keys"}, {"DELETE", "/api-keys/" + adminKey[0].ID},
			{"POST", "/templates"}, {"GET", "/templates"}, {"GET", "/templates/" + tpl.Id}, {"PATCH", "/templates/" + tpl.Id},
			{"DELETE", "/templates/" + tpl.Id}, {"POST", "/templates/" + tpl.Id + "/publish"}, {"POST", "/templates/" + tpl.Id + "/duplicate"},
		}
		for _, rt := range routes {
			r := env.Do(t, sendoncetest.Request{Method: rt.method, Path: rt.path, Key: sending.Token, Body: map[string]any{"name": "x"}})
			if r.Status != http.StatusForbidden || r.JSON(t)["name"] != "restricted_api_key" {
				t.Errorf("%s %s with a sending_access key: %d %s", rt.method, rt.path, r.Status, r.Body)
			}
		}

		// Another tenant's admin sees none of it.
		_, other := env.NewKey(t, app.NewKeyParams{Name: "other", Tenant: "other", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead, core.ScopeAdmin}})
		oc := resendClientWith(t, env, other)
		if l, err := oc.Domains.ListWithContext(ctx); err != nil || len(l.Data) != 0 {
			t.Errorf("other tenant's domains: %+v %v", l, err)
		}
		if l, err := oc.Templates.ListWithContext(ctx, nil); err != nil || len(l.Data) != 0 {
			t.Errorf("other tenant's templates: %+v %v", l, err)
		}
		if l, err := oc.ApiKeys.ListWithContext(ctx); err != nil || len(l.Data) != 1 {
			t.Errorf("other tenant's keys: %+v %v", l, err)
		}
		for _, rt := range []struct{ method, path string }{
			{"GET", "/domains/acme.test"}, {"DELETE", "/domains/acme.test"}, {"POST", "/domains/acme.test/verify"},
			{"DELETE", "/api-keys/" + adminKey[0].ID}, {"GET", "/templates/" + tpl.Id}, {"DELETE", "/templates/" + tpl.Id},
			{"POST", "/templates/" + tpl.Id + "/publish"},
		} {
			if r := env.Do(t, sendoncetest.Request{Method: rt.method, Path: rt.path, Key: other}); r.Status != http.StatusNotFound {
				t.Errorf("%s %s by another tenant: %d %s", rt.method, rt.path, r.Status, r.Body)
			}
		}
		if _, err := admin.Domains.GetWithContext(ctx, "acme.test"); err != nil {
			t.Errorf("the domain is gone: %v", err)
		}
	})
}

func TestResendSDK_Templates(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{NoWorkers: true}, func(t *testing.T, env *sendoncetest.Env) {
		c := resendClientWith(t, env, env.AdminKey)
		ctx := testCtx(t)

		created, err := c.Templates.CreateWithContext(ctx, &resend.CreateTemplateRequest{
			Name: "Welcome", Alias: "welcome", From: "Acme <sender@example.com>", Subject: "Hi {{{NAME}}}",
			Html: "<p>Hello {{{NAME}}}, plan {{{ PLAN }}}</p>", Text: "Hello {{{NAME}}}", ReplyTo: "help@example.com",
			Variables: []*resend.TemplateVariable{{Key: "NAME", Type: resend.VariableTypeString},
				{Key: "PLAN", Type: resend.VariableTypeString, FallbackValue: "free"}},
		})
		if err != nil || created.Object != "template" || !strings.HasPrefix(created.Id, "tpl_") {
			t.Fatalf("create: %+v %v", created, err)
		}
		for _, ident := range []string{created.Id, "welcome"} {
			got, err := c.Templates.GetWithContext(ctx, ident)
			if err != nil || got.Id != created.Id || got.Name != "Welcome" || got.Alias != "welcome" || got.Status != "draft" ||
				got.Html != "<p>Hello {{{NAME}}}, plan {{{PLAN}}}</p>" || got.Subject != "Hi {{{NAME}}}" || len(got.Variables) != 2 ||
				got.From != "Acme <sender@example.com>" {
				t.Fatalf("get %s: %+v %v", ident, got, err)
			}
		}
		if _, err := c.Templates.CreateWithContext(ctx, &resend.CreateTemplateRequest{Name: "Other", Alias: "welcome", Subject: "s", Html: "x"}); err == nil {
			t.Error("a second template took the alias")
		}
		if _, err := c.Templates.CreateWithContext(ctx, &resend.CreateTemplateRequest{Name: "Bad", Subject: "s", Html: "{{{NAME}"}); err == nil {
			t.Error("a template that does not parse was stored")
		}

		if _, err := c.Templates.UpdateWithContext(ctx, "welcome", &resend.UpdateTemplateRequest{Subject: "Welcome {{{NAME}}}"}); err != nil {
			t.Fatalf("update: %v", err)
		}
		if _, err := c.Templates.PublishWithContext(ctx, "welcome"); err != nil {
			t.Fatalf("publish: %v", err)
		}
		got, err := c.Templates.GetWithContext(ctx, created.Id)
		if err != nil || got.Subject != "Welcome {{{NAME}}}" || got.Name != "Welcome" || got.Status != "published" || got.PublishedAt == "" ||
			!strings.Contains(got.Html, "{{{NAME}}}") {
			t.Fatalf("after update and publish: %+v %v", got, err)
		}
		dup, err := c.Templates.DuplicateWithContext(ctx, "welcome")
		if err != nil || dup.Id == created.Id {
			t.Fatalf("duplicate: %+v %v", dup, err)
		}
		copied, err := c.Templates.GetWithContext(ctx, dup.Id)
		if err != nil || copied.Name != "Welcome (copy)" || copied.Status != "draft" || copied.Alias != "" || copied.Subject != got.Subject {
			t.Fatalf("the copy: %+v %v", copied, err)
		}
		if r := env.Do(t, sendoncetest.Request{Method: "PUT", Path: "/v1/templates/native", Key: env.AdminKey,
			Body: map[string]any{"subject": "N {{.x}}", "text": "n"}}); r.Status != http.StatusCreated {
			t.Fatalf("native put: %d %s", r.Status, r.Body)
		}
		list, err := c.Templates.ListWithContext(ctx, nil)
		if err != nil || len(list.Data) != 3 {
			t.Fatalf("list: %+v %v", list, err)
		}

		// Send with the template by alias: from, reply_to and the PLAN
		// fallback come from it.
		sent, err := c.Emails.SendWithContext(ctx, &resend.SendEmailRequest{To: []string{"ada@example.com"},
			Template: &resend.EmailTemplate{Id: "welcome", Variables: map[string]any{"NAME": "Ada"}}})
		if err != nil {
			t.Fatalf("send with template: %v", err)
		}
		email, err := c.Emails.GetWithContext(ctx, sent.Id)
		if err != nil || email.Subject != "Welcome Ada" || email.Html != "<p>Hello Ada, plan free</p>" || email.From != `"Acme" <sender@example.com>` ||
			len(email.ReplyTo) != 1 || email.ReplyTo[0] != "help@example.com" {
			t.Fatalf("the sent email: %+v %v", email, err)
		}
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/emails", Key: env.AdminKey,
			Body: map[string]any{"to": "ada@example.com", "template": map[string]any{"id": "welcome"}}})
		if r.Status != http.StatusUnprocessableEntity || r.JSON(t)["name"] != "validation_error" {
			t.Errorf("send without NAME: %d %s", r.Status, r.Body)
		}

		// Create replays by Idempotency-Key.
		body := map[string]any{"name": "Once", "subject": "s", "html": "<p>x</p>"}
		one := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/templates", Key: env.AdminKey, IdemKey: "tpl-1", Body: body})
		two := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/templates", Key: env.AdminKey, IdemKey: "tpl-1", Body: body})
		if one.Status != http.StatusOK || string(one.Body) != string(two.Body) || two.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay: %d %s / %s", one.Status, one.Body, two.Body)
		}

		if rm, err := c.Templates.RemoveWithContext(ctx, "welcome"); err != nil || !rm.Deleted || rm.Id != created.Id {
			t.Fatalf("remove: %+v %v", rm, err)
		}
		if _, err := c.Templates.GetWithContext(ctx, created.Id); err == nil {
			t.Error("get after remove succeeded")
		}
	})
}

// TestResendAPIKeys_NewKeyIsNoFreerThanItsCreator: a key made through
// POST /api-keys by an admin key with a recipient allowlist, approval and
// caps inherits all of them (it once inherited only the mailboxes), and
// asking for more than the creator has is refused.
func TestResendAPIKeys_NewKeyIsNoFreerThanItsCreator(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{NoWorkers: true}, func(t *testing.T, env *sendoncetest.Env) {
		_, creator := env.NewKey(t, app.NewKeyParams{Name: "limited", Tenant: "default",
			Scopes: []core.Scope{core.ScopeSend, core.ScopeRead, core.ScopeAdmin}, AllowRecipients: []string{"team.example"},
			RequiresApproval: true, MaxPerHour: 5})
		ctx := testCtx(t)
		made, err := resendClientWith(t, env, creator).ApiKeys.CreateWithContext(ctx, &resend.CreateApiKeyRequest{Name: "child"})
		if err != nil {
			t.Fatal(err)
		}
		child := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: made.Token, IdemKey: "c-1",
			Body: mail(t, "stranger@elsewhere.example", "hi")})
		if child.Status != http.StatusForbidden {
			t.Fatalf("the child sent outside its creator's allowlist: %d %s, want 403", child.Status, child.Body)
		}
		ok := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: made.Token, IdemKey: "c-2",
			Body: mail(t, "ada@team.example", "hi")})
		if ok.Status != http.StatusOK || ok.JSON(t)["status"] != string(core.StatusPendingApproval) {
			t.Fatalf("the child's send inside the allowlist: %d %s, want 200 pending_approval", ok.Status, ok.Body)
		}
		keys, err := env.Server.Service.TenantKeys(ctx, "default")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if k.ID == made.Id && (k.MaxPerHour != 5 || !k.RequiresApproval) {
				t.Errorf("the child's caps %d/h, approval %v: want the creator's 5/h and approval", k.MaxPerHour, k.RequiresApproval)
			}
		}
	})
}
