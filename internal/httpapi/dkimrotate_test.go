package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestDKIMRotate_RefusalsAndTheCheckOfAPendingKey: the rotate route is
// admin only, 404 for a domain the tenant has not added, 4xx for a bad
// body, selector or algorithm (a selector of the domain's is taken); and
// while its record is not published, the check reports the pending key's
// own DKIM finding and promotes nothing.
func TestDKIMRotate_RefusalsAndTheCheckOfAPendingKey(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		dns := dnstest.Start(t)
		a := newSendAPI(t, sendoncetest.Options{Backend: backend, NoWorkers: true, SecretKey: domainsSecret, DNSResolver: dns.Addr()})
		dns.Publish(t, a.AddDomain(t, map[string]string{"domain": "keys.test", "selector": "mail", "algorithm": "ed25519"}))
		reader := a.key(app.NewKeyParams{Scopes: []core.Scope{core.ScopeRead}})
		path := "/v1/domains/keys.test/dkim/rotate"

		a.wantError("read scope", a.post(reader, path, nil), http.StatusForbidden, core.CodeForbidden, "")
		a.wantError("unknown domain", a.post(a.AdminKey, "/v1/domains/other.test/dkim/rotate", nil), http.StatusNotFound, core.CodeNotFound, "")
		a.wantError("a selector taken", a.post(a.AdminKey, path, map[string]string{"selector": "mail"}), http.StatusUnprocessableEntity, core.CodeValidation, "selector")
		a.wantError("a bad selector", a.post(a.AdminKey, path, map[string]string{"selector": "a b"}), http.StatusUnprocessableEntity, core.CodeValidation, "selector")
		a.wantError("a bad algorithm", a.post(a.AdminKey, path, map[string]string{"algorithm": "dsa"}), http.StatusUnprocessableEntity, core.CodeValidation, "algorithm")
		if r := a.post(a.AdminKey, path, map[string]any{"selector": 7}); r.Status < 400 || r.Status >= 500 {
			t.Errorf("a selector that is not a string: %d %s, want a 4xx", r.Status, r.Body)
		}

		r := a.post(a.AdminKey, path, nil)
		if r.Status != http.StatusCreated || !strings.Contains(string(r.Body), `"selector":"mail2"`) || !strings.Contains(string(r.Body), "k=ed25519") {
			t.Fatalf("rotate: %d %s, want 201 with selector mail2, an ed25519 key as the signing one's", r.Status, r.Body)
		}
		c := a.get(a.AdminKey, "/v1/domains/keys.test/check")
		var check struct {
			Selector    string `json:"selector"`
			PendingDKIM *struct {
				Selector string
				Findings []struct{ Check, Level, Message string }
			} `json:"pending_dkim"`
			Promoted *string                            `json:"promoted_selector"`
			DKIMKeys []struct{ Selector, State string } `json:"dkim_keys"`
		}
		if err := json.Unmarshal(c.Body, &check); err != nil || c.Status != http.StatusOK {
			t.Fatalf("check: %d %s", c.Status, c.Body)
		}
		if check.Promoted != nil || check.Selector != "mail" || check.PendingDKIM == nil || check.PendingDKIM.Selector != "mail2" ||
			len(check.PendingDKIM.Findings) != 1 || check.PendingDKIM.Findings[0].Level != "error" ||
			!strings.Contains(check.PendingDKIM.Findings[0].Message, "mail2._domainkey.keys.test") {
			t.Fatalf("check without the new record: %s", c.Body)
		}
		if len(check.DKIMKeys) != 2 || check.DKIMKeys[0] != (struct{ Selector, State string }{"mail", "active"}) ||
			check.DKIMKeys[1] != (struct{ Selector, State string }{"mail2", "pending"}) {
			t.Fatalf("keys: %+v", check.DKIMKeys)
		}
	})
}
