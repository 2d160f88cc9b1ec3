package submission_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/submission"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// A key derived from a Message-ID never meets an explicit key header: a
// message whose Idempotency-Key is another message's Message-ID (a key
// that message's sender cannot choose) does not make that message 554.
func TestSubmission_MessageIDKeyNeverMeetsAnExplicitKey(t *testing.T) {
	eachEnv(t, func(t *testing.T, env *sendoncetest.Env, addr string) {
		c := dial(t, addr, env.AdminKey)
		to := []string{"ann@example.com"}
		const id = "invoice-7@example.com"
		if _, err := submit(c, "sender@example.com", to, mail(newMsgID(), "The claim.", "Idempotency-Key: "+id)); err != nil {
			t.Fatalf("explicit key: %v", err)
		}
		text, err := submit(c, "sender@example.com", to, mail("<"+id+">", "The invoice."))
		if err != nil {
			t.Fatalf("the message whose Message-ID is that key: %v, want 250", err)
		}
		if strings.Contains(text, "already accepted") {
			t.Fatalf("the message whose Message-ID is that key: %q, want a new send", text)
		}
		again, err := submit(c, "sender@example.com", to, mail("<"+id+">", "The invoice."))
		if err != nil || !strings.Contains(again, "already accepted as "+sendID(t, text)) {
			t.Fatalf("its retry: %q %v, want its send replayed", again, err)
		}
	})
}

// A message accepted before the upgrade, its Message-ID key stored in the
// plain form, replays when retried after it: nothing is sent twice.
func TestSubmission_MessageIDKeyReplaysAcrossUpgrade(t *testing.T) {
	eachEnv(t, func(t *testing.T, env *sendoncetest.Env, addr string) {
		c := dial(t, addr, env.AdminKey)
		to := []string{"ann@example.com"}
		const id = "before-upgrade@example.com"
		data := mail("<"+id+">", "Accepted before the upgrade.")
		sc := idempotency.Scope{Tenant: "default", Method: "SMTP", Route: "submission", Key: id}
		putPlain(t, env, sc, submission.LegacyFingerprint("sender@example.com", to, data), `{"id":"snd_01accepted0before0upgrade"}`)

		text, err := submit(c, "sender@example.com", to, data)
		if err != nil || !strings.Contains(text, "already accepted as snd_01accepted0before0upgrade") {
			t.Fatalf("retry after the upgrade: %q %v, want the first acceptance replayed", text, err)
		}
		if n := sendsOf(t, env, id); n != 0 {
			t.Fatalf("%d sends made by the retry, want none", n)
		}
	})
}

// A key limited to a mailbox has keys of its limits: another key of the
// tenant that submits first under the same (predictable) key, with other
// content, does not make its message 554, and its retry replays its own —
// also through the key it is rotated into, with the same limits.
func TestSubmission_RestrictedKeyHasItsOwnKeys(t *testing.T) {
	eachEnv(t, func(t *testing.T, env *sendoncetest.Env, addr string) {
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, Body: map[string]any{"id": "a", "address": "a@example.com"}}); r.Status != 201 {
			t.Fatalf("create mailbox: %d %s", r.Status, r.Body)
		}
		old, limited := env.NewKey(t, app.NewKeyParams{Name: "limited", Scopes: []core.Scope{core.ScopeSend}, Mailboxes: []string{"a"}})
		to := []string{"ann@example.com"}
		const key = "Idempotency-Key: order-1"
		if _, err := submit(dial(t, addr, env.AdminKey), "sender@example.com", to, mail(newMsgID(), "The claim.", key)); err != nil {
			t.Fatalf("admin's message: %v", err)
		}
		own := []byte(strings.Replace(string(mail(newMsgID(), "Its own.", key)), "From: App <sender@example.com>", "From: a@example.com", 1))
		lc := dial(t, addr, limited)
		text, err := submit(lc, "a@example.com", to, own)
		if err != nil || strings.Contains(text, "already accepted") {
			t.Fatalf("the limited key's message: %q %v, want a new send", text, err)
		}
		if again, err := submit(lc, "a@example.com", to, own); err != nil || !strings.Contains(again, "already accepted as "+sendID(t, text)) {
			t.Fatalf("its retry: %q %v, want its own send replayed", again, err)
		}
		if err := env.Server.Service.RevokeTenantKey(context.Background(), "default", old.ID); err != nil {
			t.Fatalf("revoke: %v", err)
		}
		_, rotated := env.NewKey(t, app.NewKeyParams{Name: "rotated", Scopes: []core.Scope{core.ScopeSend}, Mailboxes: []string{"a"}})
		if again, err := submit(dial(t, addr, rotated), "a@example.com", to, own); err != nil || !strings.Contains(again, "already accepted as "+sendID(t, text)) {
			t.Fatalf("its retry through the rotated key: %q %v, want the send replayed", again, err)
		}
	})
}

// putPlain stores a completed SMTP record under sc as an older version
// did, before Message-ID keys and restricted keys had forms of their own.
func putPlain(t *testing.T, env *sendoncetest.Env, sc idempotency.Scope, fp, answer string) {
	t.Helper()
	env.PutIdempotencyRecord(t, sc, fp, idempotency.Response{Status: 250, ContentType: "application/json", Body: []byte(answer)})
}

// A Message-ID is the message's, not a key into the database: another
// tenant's message with the same Message-ID, and this tenant's message
// with the same Message-ID under another explicit key, are each a new
// send (a global UNIQUE once made them 451 on every retry, and let one
// tenant block another's mail).
func TestSubmission_OneMessageIDOnSeveralMessages(t *testing.T) {
	eachEnv(t, func(t *testing.T, env *sendoncetest.Env, addr string) {
		_, other := env.NewKey(t, app.NewKeyParams{Name: "other", Tenant: "other", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead, core.ScopeAdmin}})
		to := []string{"ann@example.com"}
		id := newMsgID()
		seen := map[string]bool{}
		for i, c := range []struct {
			key, header string
		}{{env.AdminKey, "Idempotency-Key: first"}, {env.AdminKey, "Idempotency-Key: second"}, {other, "Idempotency-Key: first"}} {
			text, err := submit(dial(t, addr, c.key), "sender@example.com", to, mail(id, "Same Message-ID.", c.header))
			if err != nil || strings.Contains(text, "already accepted") {
				t.Fatalf("message %d: %q %v, want a new send", i, text, err)
			}
			seen[sendID(t, text)] = true
		}
		if len(seen) != 3 {
			t.Fatalf("%d distinct sends, want 3", len(seen))
		}
	})
}
