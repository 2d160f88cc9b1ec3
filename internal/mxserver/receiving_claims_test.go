package mxserver_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// claim posts body to path with key and returns the response.
func claim(t *testing.T, env *sendoncetest.Env, key, path string, body map[string]any) *sendoncetest.Response {
	t.Helper()
	return env.Do(t, sendoncetest.Request{Method: "POST", Path: path, Key: key, IdemKey: app.NewID("k"), Body: body})
}

// refusal is the message of a native or Resend error body, without the
// Resend form's "(field …)" and with address replaced by ADDR.
func refusal(t *testing.T, r *sendoncetest.Response, address string) string {
	t.Helper()
	var b struct {
		Message string `json:"message"`
		Error   struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &b); err != nil {
		t.Fatalf("error body: %v: %s", err, r.Body)
	}
	msg := b.Error.Message + b.Message
	if i := strings.LastIndex(msg, " (field "); i >= 0 {
		msg = msg[:i]
	}
	return strings.ReplaceAll(msg, address, "ADDR")
}

// refusedAlike fails unless r is the 422 every refused receiving claim
// gets, naming nobody: its message is the one of a claim on a domain the
// tenant lacks (want).
func refusedAlike(t *testing.T, what string, r *sendoncetest.Response, address, want string) {
	t.Helper()
	if r.Status != http.StatusUnprocessableEntity {
		t.Fatalf("%s: %d %s, want 422", what, r.Status, r.Body)
	}
	if got := refusal(t, r, address); got != want {
		t.Fatalf("%s: the refusal differs from a claim nobody holds:\n%s\n%s", what, got, want)
	}
}

// TestReceiving_AddressesBelongToTheTenantsDomains: tenant B cannot claim
// an address (Resend's POST /inboxes, a mailbox marked receiving) or a
// catch-all on tenant A's receiving domain, even after adding that domain
// as a sending domain of its own; every refusal is the 422 a claim on a
// domain B lacks gets, saying nothing of A; A's mail stays A's. Under
// --require-verified-domain a claim on an unverified domain is refused
// too, so nobody squats a domain before its owner.
func TestReceiving_AddressesBelongToTheTenantsDomains(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		admin := []core.Scope{core.ScopeSend, core.ScopeRead, core.ScopeAdmin}
		_, bKey := env.NewKey(t, app.NewKeyParams{Name: "b", Tenant: "b", Scopes: admin})
		if r := claim(t, env, env.AdminKey, "/v1/mailboxes", map[string]any{"id": "desk", "address": "desk@a.example"}); r.Status != http.StatusCreated {
			t.Fatalf("A's mailbox: %d %s", r.Status, r.Body)
		}
		if r := claim(t, env, env.AdminKey, "/v1/domains", map[string]any{"domain": "a.example", "receiving": true, "catch_all": "desk"}); r.Status != http.StatusCreated {
			t.Fatalf("A's receiving domain: %d %s", r.Status, r.Body)
		}
		nobody := claim(t, env, bKey, "/inboxes", map[string]any{"email_address": "ceo@nobody.example"})
		if nobody.Status != http.StatusUnprocessableEntity {
			t.Fatalf("an inbox on a domain B lacks: %d %s", nobody.Status, nobody.Body)
		}
		want := refusal(t, nobody, "ceo@nobody.example")
		refusedAlike(t, "B's inbox on A's domain", claim(t, env, bKey, "/inboxes", map[string]any{"email_address": "ceo@a.example"}), "ceo@a.example", want)
		if r := claim(t, env, bKey, "/v1/domains", map[string]any{"domain": "a.example"}); r.Status != http.StatusCreated {
			t.Fatalf("B adds a.example to send: %d %s", r.Status, r.Body)
		}
		refusedAlike(t, "B's inbox on A's receiving domain B added too", claim(t, env, bKey, "/inboxes", map[string]any{"email_address": "ceo@a.example"}), "ceo@a.example", want)
		refusedAlike(t, "B's native inbox on A's domain", claim(t, env, bKey, "/v1/inboxes", map[string]any{"address": "ceo@a.example"}), "ceo@a.example", want)
		refusedAlike(t, "B's receiving mailbox on A's domain", claim(t, env, bKey, "/v1/mailboxes",
			map[string]any{"id": "ceo", "address": "ceo@a.example", "receiving": true}), "ceo@a.example", want)
		if r := claim(t, env, env.AdminKey, "/inboxes", map[string]any{"email_address": "ceo@a.example"}); r.Status != http.StatusCreated {
			t.Fatalf("A's own inbox on its domain: %d %s", r.Status, r.Body)
		}
		if err := receive(t, env.InboundAddr, "ceo@a.example", []byte(strings.Replace(plainMail, "Help, please", "Confidential merger", 1))); err != nil {
			t.Fatal(err)
		}
		if n := len(receivedList(t, env)); n != 1 {
			t.Fatalf("A received %d messages, want 1", n)
		}
		if _, l := get(t, env, bKey, "/v1/received"); len(l["data"].([]any)) != 0 {
			t.Fatalf("B reads A's mail: %v", l)
		}

		// The owner of a domain B added first as receiving is refused with
		// the same 422, not a 409 that says the domain is taken.
		if r := claim(t, env, bKey, "/v1/domains", map[string]any{"domain": "squat.example", "receiving": true}); r.Status != http.StatusCreated {
			t.Fatalf("B's receiving domain: %d %s", r.Status, r.Body)
		}
		r := claim(t, env, env.AdminKey, "/v1/domains", map[string]any{"domain": "squat.example", "receiving": true})
		refusedAlike(t, "A's receiving domain B holds", r, "@squat.example", want)
	})
}

// TestReceiving_ClaimsNeedVerifiedDomains: with --require-verified-domain
// a receiving domain cannot be added unverified, and an inbox is refused
// on an added domain until it is verified.
func TestReceiving_ClaimsNeedVerifiedDomains(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true, RequireVerifiedDomain: true}, func(t *testing.T, env *sendoncetest.Env) {
		if r := claim(t, env, env.AdminKey, "/v1/domains", map[string]any{"domain": "v.example", "receiving": true}); r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("an unverified receiving domain: %d %s", r.Status, r.Body)
		}
		if r := claim(t, env, env.AdminKey, "/v1/domains", map[string]any{"domain": "v.example"}); r.Status != http.StatusCreated {
			t.Fatalf("add domain: %d %s", r.Status, r.Body)
		}
		if r := claim(t, env, env.AdminKey, "/inboxes", map[string]any{"email_address": "help@v.example"}); r.Status != http.StatusUnprocessableEntity {
			t.Fatalf("an inbox on an unverified domain: %d %s", r.Status, r.Body)
		}
		// As the domain check records it once the DKIM record is published.
		env.Exec(t, "UPDATE domains SET status = 'verified' WHERE domain = 'v.example'")
		if r := claim(t, env, env.AdminKey, "/inboxes", map[string]any{"email_address": "help@v.example"}); r.Status != http.StatusCreated {
			t.Fatalf("an inbox on a verified domain: %d %s", r.Status, r.Body)
		}
	})
}
