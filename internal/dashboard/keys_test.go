package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// A key made in the dashboard is no freer than the key signed in: a
// mailbox-limited admin key must not mint a key that sends as any of the
// tenant's mailboxes, nor shed its allowlist, approval, caps or rate limit.
func TestDashboard_CreatedKeyInheritsTheCreatorsLimits(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: app.NewID("k"),
			Body: map[string]any{"id": "other", "address": "other@example.org"}})
		if r.Status != http.StatusOK && r.Status != http.StatusCreated {
			t.Fatalf("POST /v1/mailboxes: %d %s", r.Status, r.Body)
		}
		creator, creatorSecret := env.NewKey(t, app.NewKeyParams{Name: "limited-admin",
			Scopes:    []core.Scope{core.ScopeSend, core.ScopeRead, core.ScopeAdmin},
			Mailboxes: []string{core.DefaultMailboxID}, AllowRecipients: []string{"example.net"}, RequiresApproval: true,
			MaxPerHour: 5, MaxPerDay: 20, RateLimit: 10})
		br := newBrowser(t, env)
		br.signIn(creatorSecret)
		br.get("/ui/keys")

		p := br.post("/ui/keys", url.Values{"name": {"child"}, "scope": {"send"}})
		child := shownSecret(p.Body)
		if p.Status != http.StatusCreated || child == "" {
			t.Fatalf("POST /ui/keys: %d, secret shown: %v\n%s", p.Status, child != "", p.Body)
		}
		r = env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: child, IdemKey: app.NewID("k"),
			Body: map[string]any{"mailbox_id": "other", "to": []string{"rcpt@example.net"}, "subject": "as other", "text": "x"}})
		if r.Status != http.StatusForbidden {
			t.Errorf("the new key sending from a mailbox its creator may not use: %d %s, want 403", r.Status, r.Body)
		}

		id, _, _ := strings.Cut(strings.TrimPrefix(child, "so_"), "_")
		k, err := env.Server.Store.APIKey(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(k.Mailboxes, creator.Mailboxes) || !slices.Equal(k.AllowRecipients, creator.AllowRecipients) ||
			!k.RequiresApproval || k.MaxPerHour != 5 || k.MaxPerDay != 20 || k.RateLimit != 10 {
			t.Errorf("new key: mailboxes %v, allowlist %v, approval %v, caps %d/%d, rate limit %d; want the creator's",
				k.Mailboxes, k.AllowRecipients, k.RequiresApproval, k.MaxPerHour, k.MaxPerDay, k.RateLimit)
		}

		for name, form := range map[string]url.Values{
			"a higher hourly cap":        {"max_per_hour": {"6"}},
			"a recipient beyond its own": {"allow_recipients": {"anyone.example"}},
		} {
			form.Set("name", "wider")
			form.Set("scope", "send")
			if p := br.post("/ui/keys", form); p.Status != http.StatusForbidden {
				t.Errorf("creating a key with %s: %d, want 403", name, p.Status)
			}
		}
	})
}

// A key made in the dashboard has no scope the signed-in key lacks: a
// read,admin key cannot mint a send key (403), and gives what it has.
func TestDashboard_CreatedKeyHasOnlyTheCreatorsScopes(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true})
	_, secret := env.NewKey(t, app.NewKeyParams{Name: "read-admin", Scopes: []core.Scope{core.ScopeRead, core.ScopeAdmin}})
	br := newBrowser(t, env)
	br.signIn(secret)
	br.get("/ui/keys")
	for _, scopes := range [][]string{{"send"}, {"read", "send"}, {"admin", "send"}} {
		p := br.post("/ui/keys", url.Values{"name": {"minted"}, "scope": scopes})
		if p.Status != http.StatusForbidden || shownSecret(p.Body) != "" {
			t.Errorf("a read,admin key creating a key with %v: %d, secret shown: %v; want 403", scopes, p.Status, shownSecret(p.Body) != "")
		}
	}
	p := br.post("/ui/keys", url.Values{"name": {"reader"}, "scope": {"read"}})
	if p.Status != http.StatusCreated || shownSecret(p.Body) == "" {
		t.Fatalf("a read,admin key creating a read key: %d", p.Status)
	}
}
