package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

const domainsSecret = "domains-test-secret-0123456789abcdef"

type domainJSON struct {
	Domain       string `json:"domain"`
	Object       string `json:"object"`
	Selector     string `json:"selector"`
	Algorithm    string `json:"algorithm"`
	KeyEncrypted bool   `json:"key_encrypted"`
	Records      []struct {
		Purpose, Name, Type, Value string
		Strings                    []string
		Note                       *string
	} `json:"records"`
	CreatedAt string `json:"created_at"`
}

func (a *sendAPI) domain(r *sendoncetest.Response, status int) domainJSON {
	a.t.Helper()
	if r.Status != status {
		a.t.Fatalf("%d %s, want %d", r.Status, r.Body, status)
	}
	var d domainJSON
	if err := json.Unmarshal(r.Body, &d); err != nil {
		a.t.Fatalf("not a domain: %v: %s", err, r.Body)
	}
	if bytes.Contains(r.Body, []byte("PRIVATE KEY")) {
		a.t.Fatalf("a response shows the private key: %s", r.Body)
	}
	return d
}

func (a *sendAPI) del(key, path string) *sendoncetest.Response {
	a.t.Helper()
	return a.Do(a.t, sendoncetest.Request{Method: "DELETE", Path: path, Key: key})
}

func TestDomains_AddGetListRemove(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		a := newSendAPI(t, sendoncetest.Options{Backend: backend, NoWorkers: true, SecretKey: domainsSecret})
		body := map[string]string{"domain": "Mail.Example.COM.", "selector": "S2025", "algorithm": "ed25519"}
		first := a.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/domains", Key: a.AdminKey, IdemKey: "add-1", Body: body})
		d := a.domain(first, http.StatusCreated)
		if d.Domain != "mail.example.com" || d.Object != "domain" || d.Selector != "s2025" || d.Algorithm != "ed25519" || !d.KeyEncrypted || d.CreatedAt == "" {
			t.Errorf("added domain = %+v", d)
		}
		var purposes []string
		for _, r := range d.Records {
			purposes = append(purposes, r.Purpose)
			if r.Type != "TXT" || strings.Join(r.Strings, "") != r.Value {
				t.Errorf("record %+v", r)
			}
		}
		if fmt.Sprint(purposes) != "[dkim spf dmarc]" {
			t.Fatalf("record purposes %v", purposes)
		}
		if r := d.Records[0]; r.Name != "s2025._domainkey.mail.example.com" || !strings.HasPrefix(r.Value, "v=DKIM1; k=ed25519; p=") {
			t.Errorf("DKIM record %+v", r)
		}
		if r := d.Records[1]; r.Name != "mail.example.com" || !strings.HasPrefix(r.Value, "v=spf1 ") || r.Note == nil {
			t.Errorf("SPF record %+v", r)
		}
		if r := d.Records[2]; r.Name != "_dmarc.mail.example.com" || !strings.HasPrefix(r.Value, "v=DMARC1; p=none") {
			t.Errorf("DMARC record %+v", r)
		}

		// A retry is a replay; the same domain under a new key is a conflict.
		again := a.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/domains", Key: a.AdminKey, IdemKey: "add-1", Body: body})
		if again.Status != http.StatusCreated || !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("retry: %d replayed=%q", again.Status, again.Header.Get("Idempotent-Replayed"))
		}
		a.wantError("same domain again", a.post(a.AdminKey, "/v1/domains", map[string]string{"domain": "mail.example.com", "selector": "s3"}),
			http.StatusConflict, core.CodeConflict, "domain")

		got := a.domain(a.get(a.AdminKey, "/v1/domains/MAIL.example.com"), http.StatusOK)
		if got.Domain != d.Domain || got.Records[0].Value != d.Records[0].Value {
			t.Errorf("GET = %+v, want %+v", got, d)
		}
		var l struct {
			Object string
			Data   []domainJSON
		}
		if r := a.get(a.AdminKey, "/v1/domains"); r.Status != http.StatusOK || json.Unmarshal(r.Body, &l) != nil || l.Object != "list" || len(l.Data) != 1 || l.Data[0].Domain != d.Domain {
			t.Errorf("list: %d %s", r.Status, r.Body)
		}

		if r := a.del(a.AdminKey, "/v1/domains/mail.example.com"); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"deleted":true`) {
			t.Errorf("DELETE: %d %s", r.Status, r.Body)
		}
		a.wantError("GET removed", a.get(a.AdminKey, "/v1/domains/mail.example.com"), http.StatusNotFound, core.CodeNotFound, "")
		a.wantError("DELETE removed", a.del(a.AdminKey, "/v1/domains/mail.example.com"), http.StatusNotFound, core.CodeNotFound, "")
		a.wantError("GET never added", a.get(a.AdminKey, "/v1/domains/other.example"), http.StatusNotFound, core.CodeNotFound, "")
		a.wantError("GET not a name", a.get(a.AdminKey, "/v1/domains/not_a_name"), http.StatusNotFound, core.CodeNotFound, "")
		a.wantError("check never added", a.get(a.AdminKey, "/v1/domains/other.example/check"), http.StatusNotFound, core.CodeNotFound, "")
		// Removed, the domain may be added again (with a new key).
		if d2 := a.domain(a.post(a.AdminKey, "/v1/domains", map[string]string{"domain": "mail.example.com", "algorithm": "ed25519"}), http.StatusCreated); d2.Selector != app.DefaultSelector || d2.Records[0].Value == d.Records[0].Value {
			t.Errorf("re-added: %+v", d2)
		}
	})
}

func TestDomains_ScopesAndTenants(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		a := newSendAPI(t, sendoncetest.Options{Backend: backend, NoWorkers: true})
		reader := a.key(app.NewKeyParams{Scopes: []core.Scope{core.ScopeRead}})
		sender := a.key(app.NewKeyParams{Scopes: []core.Scope{core.ScopeSend}})
		other := a.key(app.NewKeyParams{Tenant: "other", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead, core.ScopeAdmin}})
		mine := a.domain(a.post(a.AdminKey, "/v1/domains", map[string]string{"domain": "shared.example", "algorithm": "ed25519"}), http.StatusCreated)
		if mine.KeyEncrypted {
			t.Errorf("key_encrypted is true without a secret")
		}

		a.wantError("add with read", a.post(reader, "/v1/domains", map[string]string{"domain": "x.example"}), http.StatusForbidden, core.CodeForbidden, "")
		a.wantError("delete with read", a.del(reader, "/v1/domains/shared.example"), http.StatusForbidden, core.CodeForbidden, "")
		a.wantError("check with read", a.get(reader, "/v1/domains/shared.example/check"), http.StatusForbidden, core.CodeForbidden, "")
		a.wantError("list with send", a.get(sender, "/v1/domains"), http.StatusForbidden, core.CodeForbidden, "")
		if r := a.get(reader, "/v1/domains/shared.example"); r.Status != http.StatusOK {
			t.Errorf("GET with read: %d %s", r.Status, r.Body)
		}

		for _, p := range []string{"/v1/domains/shared.example", "/v1/domains/shared.example/check"} {
			a.wantError("other tenant GET "+p, a.get(other, p), http.StatusNotFound, core.CodeNotFound, "")
		}
		a.wantError("other tenant DELETE", a.del(other, "/v1/domains/shared.example"), http.StatusNotFound, core.CodeNotFound, "")
		if r := a.get(other, "/v1/domains"); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"data":[]`) {
			t.Errorf("other tenant's list: %d %s", r.Status, r.Body)
		}
		// The other tenant has its own key for the same name.
		theirs := a.domain(a.post(other, "/v1/domains", map[string]string{"domain": "shared.example", "algorithm": "ed25519"}), http.StatusCreated)
		if theirs.Records[0].Value == mine.Records[0].Value {
			t.Errorf("two tenants share one key")
		}
		if got := a.domain(a.get(a.AdminKey, "/v1/domains/shared.example"), http.StatusOK); got.Records[0].Value != mine.Records[0].Value {
			t.Errorf("our domain changed after the other tenant added theirs")
		}
	})
}

func TestDomains_BadInputIs422(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		a := newSendAPI(t, sendoncetest.Options{Backend: backend, NoWorkers: true})
		long := strings.Repeat("a", 63)
		for _, c := range []struct {
			body  map[string]any
			param string
		}{
			{map[string]any{}, "domain"},
			{map[string]any{"domain": ""}, "domain"},
			{map[string]any{"domain": "localhost"}, "domain"},
			{map[string]any{"domain": "exa mple.com"}, "domain"},
			{map[string]any{"domain": "-bad.example"}, "domain"},
			{map[string]any{"domain": "a..example"}, "domain"},
			{map[string]any{"domain": "192.0.2.1"}, "domain"},
			{map[string]any{"domain": "user@example.com"}, "domain"},
			{map[string]any{"domain": "example.com/path"}, "domain"},
			{map[string]any{"domain": "_dmarc.example.com"}, "domain"},
			{map[string]any{"domain": strings.Repeat(long+".", 4) + "example"}, "domain"},
			{map[string]any{"domain": "example.com", "selector": "s 1"}, "selector"},
			{map[string]any{"domain": "example.com", "selector": "-s"}, "selector"},
			{map[string]any{"domain": "example.com", "algorithm": "rsa1024"}, "algorithm"},
			{map[string]any{"domain": "example.com", "dkim_key": "x"}, "dkim_key"},
			{map[string]any{"domain": 42}, "domain"},
		} {
			a.wantError(fmt.Sprint(c.body), a.post(a.AdminKey, "/v1/domains", c.body), http.StatusUnprocessableEntity, core.CodeValidation, c.param)
		}
		// An internationalized name is stored as its A-labels.
		if d := a.domain(a.post(a.AdminKey, "/v1/domains", map[string]string{"domain": "Bücher.example", "algorithm": "ed25519"}), http.StatusCreated); d.Domain != "xn--bcher-kva.example" {
			t.Errorf("IDN stored as %q", d.Domain)
		}
		if r := a.get(a.AdminKey, "/v1/domains/b%C3%BCcher.example"); r.Status != http.StatusOK {
			t.Errorf("GET by U-label: %d %s", r.Status, r.Body)
		}
	})
}

// TestDomains_CheckUsesTheServersResolverAndStoredKey: the check route
// queries the configured resolver (a ?resolver= is ignored) and compares
// the published DKIM key with the stored one.
func TestDomains_CheckUsesTheServersResolverAndStoredKey(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		first := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, NoWorkers: true})
		r := first.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/domains", Key: first.AdminKey, Body: map[string]string{"domain": "checked.test"}})
		if r.Status != http.StatusCreated {
			t.Fatalf("add: %d %s", r.Status, r.Body)
		}
		var d domainJSON
		if err := json.Unmarshal(r.Body, &d); err != nil {
			t.Fatal(err)
		}
		first.Close()
		dkimRR := d.Records[0].Name + ". TXT"
		for _, s := range d.Records[0].Strings {
			dkimRR += fmt.Sprintf(" %q", s)
		}
		dns := dnstest.Start(t,
			"checked.test. MX 10 mx.checked.test.",
			"mx.checked.test. A 192.0.2.25",
			`checked.test. TXT "v=spf1 mx ~all"`,
			dkimRR,
			`_dmarc.checked.test. TXT "v=DMARC1; p=quarantine; rua=mailto:dmarc-reports@checked.test"`,
		)
		a := &sendAPI{Env: sendoncetest.Start(t, sendoncetest.Options{Backend: backend, NoWorkers: true, DB: first.DB, DNSResolver: dns.Addr()}), t: t}

		r = a.get(a.AdminKey, "/v1/domains/checked.test/check?resolver=192.0.2.53:53")
		var rep struct {
			Object, Level, Domain, Selector, Resolver string
			Findings                                  []struct{ Check, Level, Message, Fix string }
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &rep) != nil {
			t.Fatalf("check: %d %s", r.Status, r.Body)
		}
		if rep.Object != "dns_check" || rep.Domain != "checked.test" || rep.Selector != "s1" || rep.Resolver != dns.Addr() {
			t.Errorf("report header: %+v", rep)
		}
		matched := false
		for _, f := range rep.Findings {
			if f.Level == "error" {
				t.Errorf("error finding: %+v", f)
			}
			if f.Level != "ok" && f.Fix == "" {
				t.Errorf("a %s finding without a fix: %+v", f.Level, f)
			}
			matched = matched || (f.Check == "dkim" && f.Level == "ok" && strings.Contains(f.Message, "the one sendonce signs"))
		}
		if !matched || rep.Level == "error" {
			t.Errorf("level %s; no finding that the published key is the stored one: %s", rep.Level, r.Body)
		}
	})
}
