package app_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// Replies and forwards are sends on every door, with the same rules: the
// same request through the native routes, Resend's thread routes and
// Mailera's mailbox route needs send and read (a send-only key: 403
// everywhere), the native routes need an Idempotency-Key as POST /v1/send
// does, and a reply's scheduled_at is honoured.
func TestReplyAndForward_SameRulesOnEveryDoor(t *testing.T) {
	env, inbox, rcv := receivedQuestion(t)
	_, sendOnly := env.NewKey(t, app.NewKeyParams{Name: "send-only", Scopes: []core.Scope{core.ScopeSend}, Mailboxes: []string{inbox.ID}})
	_, both := env.NewKey(t, app.NewKeyParams{Name: "both", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}, Mailboxes: []string{inbox.ID}})
	native := "/v1/received/" + rcv.ID
	resend := "/inboxes/" + inbox.ID + "/threads/" + rcv.ThreadID + "/emails/" + rcv.ID
	doors := []struct {
		name string
		path string
		body map[string]any
	}{
		{"native reply", native + "/reply", map[string]any{"text": "Hi"}},
		{"native forward", native + "/forward", map[string]any{"to": []string{"bob@outside.example"}}},
		{"Resend reply", resend + "/reply", map[string]any{"text": "Hi"}},
		{"Resend forward", resend + "/forward", map[string]any{"to": []string{"bob@outside.example"}}},
		{"Mailera reply", "/api/public/v1/mailboxes/" + inbox.ID + "/send", map[string]any{"mode": "reply", "reply_to_id": rcv.ID, "text": "Hi"}},
	}
	for _, d := range doors {
		r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: d.path, Key: sendOnly, IdemKey: "so-" + strings.ReplaceAll(d.name, " ", "-"), Body: d.body})
		if r.Status != http.StatusForbidden {
			t.Errorf("%s with a send-only key: %d %s, want 403", d.name, r.Status, r.Body)
		}
		r = env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: d.path, Key: both, IdemKey: "both-" + strings.ReplaceAll(d.name, " ", "-"), Body: d.body})
		if r.Status != http.StatusOK {
			t.Errorf("%s with send and read: %d %s, want 200", d.name, r.Status, r.Body)
		}
	}
	for _, d := range doors[:2] {
		r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: d.path, Key: both, Body: d.body})
		if r.Status != http.StatusBadRequest || r.ErrorCode() != "idempotency_key_required" {
			t.Errorf("%s without an Idempotency-Key: %d %s, want 400 idempotency_key_required", d.name, r.Status, r.Body)
		}
	}
	at := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: native + "/reply", Key: both, IdemKey: "later",
		Body: map[string]any{"text": "Later", "scheduled_at": at}})
	if got := statusOf(t, env, r); got != string(core.StatusScheduled) || !strings.Contains(string(r.Body), at[:16]) {
		t.Errorf("a reply with scheduled_at: status %s (%s), want scheduled at %s", got, r.Body, at)
	}
}

// Answering a thread reads it: after a reply, what the thread received
// so far is no longer unread.
func TestReply_MarksTheThreadRead(t *testing.T) {
	env, _, rcv := receivedQuestion(t)
	unread := func() float64 {
		th := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: "/v1/threads/" + rcv.ThreadID, Key: env.AdminKey}).JSON(t)
		n, _ := th["unread"].(float64)
		return n
	}
	if n := unread(); n != 1 {
		t.Fatalf("before the reply: %v unread, want 1", n)
	}
	if r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/received/" + rcv.ID + "/reply", Key: env.AdminKey,
		IdemKey: "answer", Body: map[string]any{"text": "Answered"}}); r.Status != http.StatusOK {
		t.Fatalf("reply: %d %s", r.Status, r.Body)
	}
	if n := unread(); n != 0 {
		t.Errorf("after the reply: %v unread, want 0", n)
	}
}
