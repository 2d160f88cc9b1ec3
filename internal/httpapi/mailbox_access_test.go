package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestMailboxAdmin_LimitedKeySeesOnlyItsMailboxes: an admin key limited
// to mailbox a administers a alone. Mailbox b answers as if it did not
// exist: its IMAP URL cannot be replaced (404, and b is unchanged), it
// cannot be read or listed, and a domain cannot name it as catch-all
// (422, as for a mailbox that does not exist).
func TestMailboxAdmin_LimitedKeySeesOnlyItsMailboxes(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, AllowNoKey: true})
		for _, id := range []string{"a", "b"} {
			if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey,
				Body: map[string]any{"id": id, "address": id + "@example.com"}}); r.Status != http.StatusCreated {
				t.Fatalf("create mailbox %s: %d %s", id, r.Status, r.Body)
			}
		}
		_, limited := env.NewKey(t, app.NewKeyParams{Name: "limited", Scopes: []core.Scope{core.ScopeAdmin, core.ScopeRead}, Mailboxes: []string{"a"}})

		put := func(id string) int {
			return env.Do(t, sendoncetest.Request{Method: "PUT", Path: "/v1/mailboxes/" + id + "/imap", Key: limited,
				Body: map[string]any{"imap": "imap://mallory:pw@127.0.0.9:1143?tls=none"}}).Status
		}
		if got := put("b"); got != http.StatusNotFound {
			t.Errorf("PUT another mailbox's imap: %d, want 404", got)
		}
		if r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/mailboxes/b", Key: env.AdminKey}); r.Status != 200 || r.JSON(t)["imap"] != nil {
			t.Errorf("mailbox b after the refused PUT: %d %s, want it unconnected", r.Status, r.Body)
		}
		if got := put("a"); got != http.StatusOK {
			t.Errorf("PUT its own mailbox's imap: %d, want 200", got)
		}
		if r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/mailboxes/b", Key: limited}); r.Status != http.StatusNotFound {
			t.Errorf("GET another mailbox: %d, want 404", r.Status)
		}
		r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/mailboxes", Key: limited})
		if data := r.JSON(t)["data"].([]any); len(data) != 1 || data[0].(map[string]any)["id"] != "a" {
			t.Errorf("list: %s, want mailbox a alone", r.Body)
		}
		domain := func(name, catchAll string) int {
			return env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/domains", Key: limited, IdemKey: app.NewID("k"),
				Body: map[string]any{"domain": name, "catch_all": catchAll}}).Status
		}
		if got := domain("b.example", "b"); got != http.StatusUnprocessableEntity {
			t.Errorf("a domain whose catch-all is another mailbox: %d, want 422", got)
		}
		if got := domain("a.example", "a"); got != http.StatusCreated {
			t.Errorf("a domain whose catch-all is its own mailbox: %d, want 201", got)
		}
	})
}
