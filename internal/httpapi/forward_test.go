package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestForward_OnlyWhatTheKeyCanRead: mode=forward renders the original
// into the new message, so it is a read. A key without the read scope may
// forward nothing; a key limited to mailboxes (agent keys are) only sends
// of those mailboxes and the inbox copies of those sends. Others' messages
// answer as if they did not exist.
func TestForward_OnlyWhatTheKeyCanRead(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{AllowNoKey: true})
	if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, Body: map[string]any{"id": "a", "address": "a@example.com"}}); r.Status != 201 {
		t.Fatalf("create mailbox: %d %s", r.Status, r.Body)
	}
	_, sendOnly := env.NewKey(t, app.NewKeyParams{Name: "send-only", Scopes: []core.Scope{core.ScopeSend}})
	_, limited := env.NewKey(t, app.NewKeyParams{Name: "limited", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}, Mailboxes: []string{"a"}})
	_, agent := env.NewKey(t, app.NewKeyParams{Name: "agent", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}, Mailboxes: []string{"a"}, Agent: true})

	sendAs := func(key, mailbox, subject string) map[string]any {
		t.Helper()
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/api/public/v1/mailboxes/" + mailbox + "/send", Key: key,
			Body: map[string]any{"to": "ann@example.com", "subject": subject, "text": "secret " + subject}})
		if r.Status != 200 {
			t.Fatalf("send %s: %d %s", subject, r.Status, r.Body)
		}
		s := r.JSON(t)
		env.WaitStatus(t, s["id"].(string), 20*time.Second, core.StatusSent)
		return s
	}
	other := sendAs(env.AdminKey, "default", "payroll")
	own := sendAs(limited, "a", "own")
	inbox := func(subject string) string {
		t.Helper()
		r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/inbox?limit=100", Key: env.AdminKey})
		for _, m := range r.JSON(t)["data"].([]any) {
			if m := m.(map[string]any); m["subject"] == subject {
				return m["id"].(string)
			}
		}
		t.Fatalf("no inbox message %q in %s", subject, r.Body)
		return ""
	}
	otherMsg, ownMsg := inbox("payroll"), inbox("own")

	forward := func(key, original string) *sendoncetest.Response {
		return env.Do(t, sendoncetest.Request{Method: "POST", Path: "/api/public/v1/mailboxes/a/send", Key: key,
			Body: map[string]any{"mode": "forward", "original_id": original, "to": "boss@example.com"}})
	}
	tests := []struct {
		name, key, original string
		status              int
		code                string
	}{
		{"send-only key, a send", sendOnly, other["id"].(string), 403, "forbidden"},
		{"send-only key, an inbox message", sendOnly, otherMsg, 403, "forbidden"},
		{"limited key, another mailbox's send", limited, other["id"].(string), 422, "validation_error"},
		{"limited key, another mailbox's inbox copy", limited, otherMsg, 422, "validation_error"},
		{"agent key, another mailbox's send", agent, other["id"].(string), 422, "validation_error"},
		{"agent key, another mailbox's inbox copy", agent, otherMsg, 422, "validation_error"},
		{"limited key, its mailbox's send", limited, own["id"].(string), 200, ""},
		{"limited key, its mailbox's inbox copy", limited, ownMsg, 200, ""},
		{"agent key, its mailbox's send", agent, own["id"].(string), 200, ""},
		{"admin key, any send", env.AdminKey, other["id"].(string), 200, ""},
	}
	for _, tt := range tests {
		r := forward(tt.key, tt.original)
		if r.Status != tt.status || (tt.code != "" && r.ErrorCode() != tt.code) {
			t.Errorf("%s: %d %s, want %d %s", tt.name, r.Status, r.Body, tt.status, tt.code)
		}
		if tt.status != 200 && strings.Contains(string(r.Body), "secret") {
			t.Errorf("%s: the refusal shows the original: %s", tt.name, r.Body)
		}
	}
}

// TestForward_ChainIsBounded: a forward stores the whole original beside
// its own text, so a chain of forwards grew the stored message by up to a
// request body each time, until each small request (original_id only)
// stored 10 MiB. The original may be at most as large as a request body.
func TestForward_ChainIsBounded(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{AllowNoKey: true})
	text := strings.Repeat("lorem ipsum dolor sit amet\n", 24000)
	r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: env.AdminKey,
		Body: map[string]any{"to": "ann@example.com", "subject": "big", "text": text}})
	if r.Status != 200 {
		t.Fatalf("send: %d %s", r.Status, r.Body)
	}
	id := r.JSON(t)["id"].(string)
	for step := 1; ; step++ {
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/api/public/v1/mailboxes/default/send", Key: env.AdminKey,
			Body: map[string]any{"mode": "forward", "original_id": id, "to": "boss@example.com", "text": text}})
		if r.Status == 422 && r.ErrorCode() == "validation_error" && strings.Contains(string(r.Body), "original_id") {
			break
		}
		if r.Status != 200 || step >= 4 {
			t.Fatalf("forward %d: %d %s, want a 422 on original_id by the 4th", step, r.Status, r.Body)
		}
		id = r.JSON(t)["id"].(string)
	}
}
