package app_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

const question = "From: Ann <ann@outside.example>\r\nTo: support@example.com\r\nCc: bob@outside.example\r\n" +
	"Subject: Question\r\nMessage-ID: <a1@outside.example>\r\n\r\nHello?\r\n"

// receivedQuestion starts sendonce with an inbox holding one received
// message; it returns the inbox and the message.
func receivedQuestion(t *testing.T) (*sendoncetest.Env, *core.Mailbox, app.Received) {
	t.Helper()
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true})
	inbox := env.NewInbox(t, "default", "support@example.com", "Support")
	return env, inbox, env.Receive(t, inbox, question)
}

// statusOf is the status of the send an answer names (native: the send;
// Resend: {"id"}), read back.
func statusOf(t *testing.T, env *sendoncetest.Env, r *sendoncetest.Response) string {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("answer %d: %s", r.Status, r.Body)
	}
	var v struct{ ID string }
	_ = json.Unmarshal(r.Body, &v)
	got := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/sends/" + v.ID, Key: env.AdminKey})
	var s struct {
		Status string
		Events []struct{ Type, Detail string }
	}
	_ = json.Unmarshal(got.Body, &s)
	if s.Status == string(core.StatusPendingApproval) && (len(s.Events) == 0 || !strings.Contains(s.Events[0].Detail, "pending_approval: a")) {
		t.Errorf("a held send's history does not say why: %+v", s.Events)
	}
	return s.Status
}

// TestAgentMail_HeldOnEveryDoor: an agent key's reply outside the thread
// and its forward are held on the native routes and on Resend's inbox
// routes; a reply inside the thread is not; a key that is no agent's is
// held only when the request says an agent asked (Sendonce-Intent).
func TestAgentMail_HeldOnEveryDoor(t *testing.T) {
	env, inbox, rcv := receivedQuestion(t)
	mk := func(agent bool) string {
		_, s := env.NewKey(t, app.NewKeyParams{Name: "k", Agent: agent, Scopes: []core.Scope{core.ScopeSend, core.ScopeRead},
			Mailboxes: []string{inbox.ID}})
		return s
	}
	agent, plain := mk(true), mk(false)
	reply := "/v1/received/" + rcv.ID + "/reply"
	resend := "/inboxes/" + inbox.ID + "/threads/" + rcv.ThreadID + "/emails/" + rcv.ID
	intent := map[string]string{"Sendonce-Intent": `{"action":"reply"}`}
	for _, c := range []struct {
		name   string
		req    sendoncetest.Request
		status core.Status
	}{
		{"agent replies to the sender", sendoncetest.Request{Method: "POST", Path: reply, Key: agent, Body: map[string]any{"text": "Hi"}}, core.StatusQueued},
		// The question's Cc (bob) was written by a stranger: a reply-all
		// that adds him waits for a person.
		{"agent replies all", sendoncetest.Request{Method: "POST", Path: reply, Key: agent, Body: map[string]any{"text": "Hi all", "reply_all": true}}, core.StatusPendingApproval},
		{"agent replies outside", sendoncetest.Request{Method: "POST", Path: reply, Key: agent, Body: map[string]any{"text": "Hi", "to": []string{"eve@evil.example"}}}, core.StatusPendingApproval},
		{"agent cc outside", sendoncetest.Request{Method: "POST", Path: reply, Key: agent, Body: map[string]any{"text": "Hi", "cc": []string{"eve@evil.example"}}}, core.StatusPendingApproval},
		{"agent forwards", sendoncetest.Request{Method: "POST", Path: "/v1/received/" + rcv.ID + "/forward", Key: agent, Body: map[string]any{"to": []string{"bob@outside.example"}}}, core.StatusPendingApproval},
		{"agent forwards on Resend's route", sendoncetest.Request{Method: "POST", Path: resend + "/forward", Key: agent, Body: map[string]any{"to": []string{"bob@outside.example"}}}, core.StatusPendingApproval},
		{"agent replies outside on Resend's route", sendoncetest.Request{Method: "POST", Path: resend + "/reply", Key: agent, Body: map[string]any{"text": "Hi", "cc": []string{"eve@evil.example"}}}, core.StatusPendingApproval},
		{"agent replies outside on Mailera's route", sendoncetest.Request{Method: "POST", Path: "/api/public/v1/mailboxes/" + inbox.ID + "/send", Key: agent,
			Body: map[string]any{"mode": "reply", "reply_to_id": rcv.ID, "to": []string{"eve@evil.example"}, "text": "Hi"}}, core.StatusPendingApproval},
		{"app replies outside", sendoncetest.Request{Method: "POST", Path: reply, Key: plain, Body: map[string]any{"text": "Hi", "to": []string{"eve@evil.example"}}}, core.StatusQueued},
		{"app forwards", sendoncetest.Request{Method: "POST", Path: "/v1/received/" + rcv.ID + "/forward", Key: plain, Body: map[string]any{"to": []string{"eve@evil.example"}}}, core.StatusQueued},
		// eve is now someone the tenant wrote to in the thread (the app's
		// reply above): mallory is not.
		{"app replies outside for an agent", sendoncetest.Request{Method: "POST", Path: reply, Key: plain, Header: intent, Body: map[string]any{"text": "Hi", "to": []string{"mallory@evil.example"}}}, core.StatusPendingApproval},
	} {
		c.req.IdemKey = "k-" + strings.ReplaceAll(c.name, " ", "-")
		if got := statusOf(t, env, env.Do(t, c.req)); got != string(c.status) {
			t.Errorf("%s: status %s, want %s", c.name, got, c.status)
		}
	}
}

// TestAgentMail_ReadsAudited: an agent key's read of a received message
// is in the audit log on every door that shows one; an app key's is not.
func TestAgentMail_ReadsAudited(t *testing.T) {
	env, inbox, rcv := receivedQuestion(t)
	key, agent := env.NewKey(t, app.NewKeyParams{Name: "a", Agent: true, Scopes: []core.Scope{core.ScopeSend, core.ScopeRead},
		Mailboxes: []string{inbox.ID}})
	_, plain := env.NewKey(t, app.NewKeyParams{Name: "p", Scopes: []core.Scope{core.ScopeRead}})
	paths := []string{"/v1/received", "/v1/received/" + rcv.ID, "/v1/received/" + rcv.ID + "/raw", "/emails/receiving/" + rcv.ID,
		"/api/public/v1/mailboxes/" + inbox.ID + "/messages", "/api/public/v1/mailboxes/" + inbox.ID + "/messages/" + rcv.ID,
		"/inboxes/" + inbox.ID + "/threads/" + rcv.ThreadID + "/emails/" + rcv.ID}
	for _, secret := range []string{agent, plain} {
		for _, p := range paths {
			if r := env.Do(t, sendoncetest.Request{Method: "GET", Path: p, Key: secret}); r.Status != 200 {
				t.Fatalf("GET %s: %d %s", p, r.Status, r.Body)
			}
		}
	}
	a := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/audit?limit=100", Key: env.AdminKey})
	var list struct {
		Data []struct {
			APIKeyID string `json:"api_key_id"`
			Route    string
			Outcome  string
			Detail   *string
		}
	}
	if err := json.Unmarshal(a.Body, &list); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range list.Data {
		if e.APIKeyID != key.ID || e.Outcome != "read" || e.Detail == nil || *e.Detail != rcv.ID {
			t.Errorf("audit entry %+v: want the agent's reads of %s only", e, rcv.ID)
			continue
		}
		seen[strings.TrimPrefix(e.Route, "GET ")] = true
	}
	for _, p := range paths {
		if !seen[p] {
			t.Errorf("no audit entry for the agent's GET %s", p)
		}
	}
}
