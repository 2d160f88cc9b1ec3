package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestRequireVerifiedDomain: with --require-verified-domain a send from a
// domain the tenant has not verified is a 403 that stores nothing — the
// same key succeeds once the domain is verified — and a verified domain
// of another tenant does not count.
func TestRequireVerifiedDomain(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{RequireVerifiedDomain: true}, func(t *testing.T, env *sendoncetest.Env) {
		send := func(key, from string) *sendoncetest.Response {
			return env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: key, IdemKey: "vf-" + strings.NewReplacer(" ", "", "<", "", ">", "").Replace(from),
				Body: map[string]any{"from": from, "to": "ann@rcpt.test", "subject": "hi", "text": "x"}})
		}
		if r := send(env.AdminKey, "shop@acme.test"); r.Status != http.StatusForbidden {
			t.Fatalf("from a domain never added: %d %s, want 403", r.Status, r.Body)
		}
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/domains", Key: env.AdminKey, IdemKey: "d-acme",
			Body: map[string]any{"domain": "acme.test"}}); r.Status != http.StatusCreated && r.Status != http.StatusOK {
			t.Fatalf("add domain: %d %s", r.Status, r.Body)
		}
		if r := send(env.AdminKey, "shop@acme.test"); r.Status != http.StatusForbidden {
			t.Fatalf("from a domain added but not verified: %d %s, want 403", r.Status, r.Body)
		}
		verify := func(tenant string) {
			err := env.Server.Store.InTx(context.Background(), func(tx core.Tx) error {
				return tx.SetDomainStatus(context.Background(), tenant, "acme.test", core.DomainVerified)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		verify("default")
		if r := send(env.AdminKey, "Shop <shop@ACME.test>"); r.Status != http.StatusOK {
			t.Fatalf("from the verified domain: %d %s, want 200", r.Status, r.Body)
		}
		if r := send(env.AdminKey, "shop@acme.test"); r.Status != http.StatusOK {
			t.Fatalf("the key refused before, once verified: %d %s, want 200 (the 403 stored nothing)", r.Status, r.Body)
		}
		_, other := env.NewKey(t, app.NewKeyParams{Name: "other", Tenant: "other", Scopes: []core.Scope{core.ScopeSend}})
		if r := send(other, "shop@acme.test"); r.Status != http.StatusForbidden {
			t.Fatalf("another tenant, from the first one's verified domain: %d %s, want 403", r.Status, r.Body)
		}
	})
}
