package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestTemplates_UnboundedRefused: the unbounded template of docs/security.md ("templates"), which used to
// exhaust the process's memory on its first send or preview, is refused
// when stored; one that data makes unbounded fails its send with a 422.
func TestTemplates_UnboundedRefused(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{AllowNoKey: true})
	do := func(method, path string, body any) *sendoncetest.Response {
		return env.Do(t, sendoncetest.Request{Method: method, Path: path, Key: env.AdminKey, Body: body})
	}
	r := do("PUT", "/v1/templates/bomb", map[string]string{"subject": "x", "text": `{{range 1000000000}}{{printf "%0999999d" 0}}{{end}}`})
	if r.Status != 422 || r.ErrorCode() != "validation_error" {
		t.Fatalf("PUT bomb: %d %s", r.Status, r.Body)
	}
	if r := do("PUT", "/v1/templates/nested", map[string]string{"subject": "x", "text": `{{range .a}}{{range $.a}}{{range $.a}}{{.}}{{end}}{{end}}{{end}}`}); r.Status/100 != 2 {
		t.Fatalf("PUT nested: %d %s", r.Status, r.Body)
	}
	a := make([]string, 1000)
	for i := range a {
		a[i] = strings.Repeat("z", 100)
	}
	start := time.Now()
	r = do("POST", "/v1/send", map[string]any{"to": "ann@example.com", "template_id": "nested", "variables": map[string]any{"a": a}})
	if r.Status != 422 || r.ErrorCode() != "validation_error" {
		t.Fatalf("send with nested: %d %s", r.Status, r.Body)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("refusal took %v", d)
	}
}

// TestMailboxLimitedKey_FromIsTheMailbox: a key limited to mailboxes may
// send only from those (docs/api.md, "Authentication and scopes"), so its from is the
// mailbox's address, whatever the display name, on the native and the
// Mailera routes. Keys without the limit keep choosing their from.
func TestMailboxLimitedKey_FromIsTheMailbox(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{AllowNoKey: true})
	if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, Body: map[string]any{"id": "a", "address": "a@example.com"}}); r.Status != 201 {
		t.Fatalf("create mailbox: %d %s", r.Status, r.Body)
	}
	_, limited := env.NewKey(t, app.NewKeyParams{Name: "limited", Scopes: []core.Scope{core.ScopeSend}, Mailboxes: []string{"a"}})
	tests := []struct {
		key, path, from string
		status          int
	}{
		{limited, "/v1/send", "ceo@example.com", 403},
		{limited, "/v1/send", "a@example.com.evil.test", 403},
		{limited, "/v1/send", `"A Team" <A@Example.com>`, 200},
		{limited, "/v1/send", "", 200},
		{limited, "/api/public/v1/mailboxes/a/send", "ceo@example.com", 403},
		{limited, "/api/public/v1/mailboxes/a/send", "a@example.com", 200},
		{env.AdminKey, "/v1/send", "ceo@example.com", 200},
	}
	for _, tt := range tests {
		body := map[string]any{"to": "ann@example.com", "subject": "s", "text": "x"}
		if tt.path == "/v1/send" {
			body["mailbox_id"] = "a"
		}
		if tt.from != "" {
			body["from"] = tt.from
		}
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: tt.path, Key: tt.key, Body: body})
		if r.Status != tt.status {
			t.Errorf("%s from %q: %d %s, want %d", tt.path, tt.from, r.Status, r.Body, tt.status)
		}
		if tt.status == 403 && r.ErrorCode() != "forbidden" {
			t.Errorf("%s from %q: code %q", tt.path, tt.from, r.ErrorCode())
		}
	}
}

// TestMailboxLimitedKey_ChangesOnlyItsMailboxesSends: a key limited to
// mailboxes cancels and moves only the sends of those, as it sends only
// from them — on the native routes and Resend's. (A mailbox-limited agent
// key once canceled a send of another mailbox and moved another key's
// send 29 days out.)
func TestMailboxLimitedKey_ChangesOnlyItsMailboxesSends(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{AllowNoKey: true, NoWorkers: true})
	for _, mb := range []string{"a", "sales"} {
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, Body: map[string]any{"id": mb, "address": mb + "@example.com"}}); r.Status != 201 {
			t.Fatalf("create mailbox: %d %s", r.Status, r.Body)
		}
	}
	_, limited := env.NewKey(t, app.NewKeyParams{Name: "limited", Scopes: []core.Scope{core.ScopeSend}, Mailboxes: []string{"a"}, Agent: true})
	scheduled := func(mailbox string) string {
		at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: env.AdminKey,
			Body: map[string]any{"to": "ann@example.com", "subject": "s", "text": "x", "mailbox_id": mailbox, "scheduled_at": at}})
		if r.Status != 200 {
			t.Fatalf("scheduled send from %s: %d %s", mailbox, r.Status, r.Body)
		}
		return r.JSON(t)["id"].(string)
	}
	later := map[string]any{"scheduled_at": time.Now().Add(29 * 24 * time.Hour).UTC().Format(time.RFC3339)}
	sales := scheduled("sales")
	for _, req := range []sendoncetest.Request{
		{Method: "PATCH", Path: "/v1/sends/" + sales, Body: later},
		{Method: "POST", Path: "/v1/sends/" + sales + "/cancel"},
		{Method: "PATCH", Path: "/emails/" + sales, Body: later},
		{Method: "POST", Path: "/emails/" + sales + "/cancel"},
	} {
		req.Key = limited
		if r := env.Do(t, req); r.Status != 403 {
			t.Errorf("%s %s with a key limited to mailbox a: %d %s, want 403", req.Method, req.Path, r.Status, r.Body)
		}
	}
	if s := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/sends/" + sales, Key: env.AdminKey}).JSON(t); s["status"] != "scheduled" || s["scheduled_at"] == later["scheduled_at"] {
		t.Errorf("the sales send was changed: %v at %v", s["status"], s["scheduled_at"])
	}
	// An agent key changes only the sends it made, even in its mailbox.
	others := scheduled("a")
	if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/sends/" + others + "/cancel", Key: limited}); r.Status != 403 {
		t.Errorf("an agent canceled another key's send of its mailbox: %d %s, want 403", r.Status, r.Body)
	}
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: limited,
		Body: map[string]any{"to": "ann@example.com", "subject": "s", "text": "x", "mailbox_id": "a", "scheduled_at": at}})
	if r.Status != 200 {
		t.Fatalf("the agent's own send: %d %s", r.Status, r.Body)
	}
	own := r.JSON(t)["id"].(string)
	if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/sends/" + own + "/cancel", Key: limited}); r.Status != 200 {
		t.Errorf("cancel of its own send: %d %s, want 200", r.Status, r.Body)
	}
	// Both refusals and the cancel are in the audit log.
	audit := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/audit?limit=100", Key: env.AdminKey}).JSON(t)
	var cancels int
	for _, e := range audit["data"].([]any) {
		if route, _ := e.(map[string]any)["route"].(string); strings.Contains(route, "cancel") {
			cancels++
		}
	}
	if cancels < 3 {
		t.Errorf("the audit log has %d entries of the agent's cancels, want its refusals and its cancel: %v", cancels, audit["data"])
	}
}
