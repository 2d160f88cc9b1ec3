package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// restrictedKeys makes mailbox "a" and two keys limited to it, one of them
// an agent's.
func restrictedKeys(t *testing.T, env *sendoncetest.Env) (limited, agent string) {
	t.Helper()
	if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, Body: map[string]any{"id": "a", "address": "a@example.com"}}); r.Status != 201 {
		t.Fatalf("create mailbox: %d %s", r.Status, r.Body)
	}
	scopes := []core.Scope{core.ScopeSend, core.ScopeRead}
	_, limited = env.NewKey(t, app.NewKeyParams{Name: "limited", Scopes: scopes, Mailboxes: []string{"a"}})
	_, agent = env.NewKey(t, app.NewKeyParams{Name: "agent", Scopes: scopes, Mailboxes: []string{"a"}, Agent: true})
	return limited, agent
}

func mailFromA(t *testing.T, subject string) []byte {
	return mustJSON(t, map[string]any{"to": "ann@example.com", "subject": subject, "text": "x", "mailbox_id": "a"})
}

// A restricted key's Idempotency-Keys are its own: another key of the
// tenant using the same key (a predictable one) neither replays nor is
// refused by it, and cannot find its send by the key; the key itself
// still gets its replay, its 422, and finds its send. An unrestricted key
// finds every send made with the key (docs/api.md, "Idempotency").
func TestIdempotency_RestrictedKeyHasItsOwnKeys(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, NoWorkers: true})
		limited, agent := restrictedKeys(t, env)
		const k = "invoice-42"

		// The agent claims the key first, with its own message.
		byAgent := post(t, env, agent, k, mailFromA(t, "from the agent"))
		requireOriginal(t, byAgent, http.StatusOK)
		// The limited key's request with the key runs: not a 422 for the
		// agent's other body.
		body := mailFromA(t, "the real invoice")
		first := post(t, env, limited, k, body)
		requireOriginal(t, first, http.StatusOK)
		// The admin key (the shared namespace) is not refused either.
		requireOriginal(t, post(t, env, env.AdminKey, k, mailFromA(t, "admin's")), http.StatusOK)

		requireReplayOf(t, first, post(t, env, limited, k, body))
		requireError(t, post(t, env, limited, k, mailFromA(t, "other")), http.StatusUnprocessableEntity, "idempotency_key_reused")
		requireReplayOf(t, byAgent, post(t, env, agent, k, mailFromA(t, "from the agent")))

		if l := listByKey(t, env, limited, k); len(l) != 1 || l[0]["id"] != sendID(t, first) {
			t.Errorf("the limited key finds by key %v, want only its %s", l, sendID(t, first))
		}
		if l := listByKey(t, env, agent, k); len(l) != 1 || l[0]["id"] != sendID(t, byAgent) {
			t.Errorf("the agent finds by key %v, want only its %s", l, sendID(t, byAgent))
		}
		if l := listByKey(t, env, env.AdminKey, k); len(l) != 3 {
			t.Errorf("the admin key finds %d sends by key, want 3", len(l))
		}
	})
}

// Keys are the tenant's, not the API key's (docs/api.md, "Idempotency"): a
// restricted key rotated into a new key with the same limits replays the
// old key's request and finds its send by key, while a key with other
// limits (another mailbox set, or not an agent's) still has keys of its
// own.
func TestIdempotency_RotatedRestrictedKeyReplays(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, NoWorkers: true})
		restrictedKeys(t, env)
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, Body: map[string]any{"id": "b", "address": "b@example.com"}}); r.Status != 201 {
			t.Fatalf("create mailbox b: %d %s", r.Status, r.Body)
		}
		scopes := []core.Scope{core.ScopeSend, core.ScopeRead}
		for _, agent := range []bool{false, true} {
			old, oldSecret := env.NewKey(t, app.NewKeyParams{Name: "old", Scopes: scopes, Mailboxes: []string{"a", "b"}, Agent: agent})
			k := fmt.Sprintf("rotate-%v", agent)
			body := mailFromA(t, "sent once")
			first := post(t, env, oldSecret, k, body)
			requireOriginal(t, first, http.StatusOK)
			if err := env.Server.Service.RevokeTenantKey(context.Background(), "default", old.ID); err != nil {
				t.Fatalf("revoke: %v", err)
			}
			// The same limits, mailboxes named in another order.
			_, rotated := env.NewKey(t, app.NewKeyParams{Name: "new", Scopes: scopes, Mailboxes: []string{"b", "a"}, Agent: agent})
			requireReplayOf(t, first, post(t, env, rotated, k, body))
			if l := listByKey(t, env, rotated, k); len(l) != 1 || l[0]["id"] != sendID(t, first) {
				t.Errorf("agent=%v: the rotated key finds by key %v, want the old key's %s", agent, l, sendID(t, first))
			}
			_, narrower := env.NewKey(t, app.NewKeyParams{Name: "narrower", Scopes: scopes, Mailboxes: []string{"a"}, Agent: agent})
			requireOriginal(t, post(t, env, narrower, k, mailFromA(t, "another body")), http.StatusOK)
			if l := listByKey(t, env, narrower, k); len(l) != 1 || l[0]["id"] == sendID(t, first) {
				t.Errorf("agent=%v: a key with other limits finds by key %v, want only its own send", agent, l)
			}
		}
	})
}

// putPlain stores a completed record under sc the way every key was stored
// before restricted keys had their own: a request accepted before the
// upgrade.
func putPlain(t *testing.T, env *sendoncetest.Env, sc idempotency.Scope, fp string, resp idempotency.Response) {
	t.Helper()
	env.PutIdempotencyRecord(t, sc, fp, resp)
}

// A restricted key's retry of a request accepted before the upgrade, whose
// record is in the plain form, replays it and sends nothing; a plain
// record with another body (another key's claim) does not refuse it.
func TestIdempotency_RestrictedKeyReplaysAcrossUpgrade(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, NoWorkers: true})
		limited, _ := restrictedKeys(t, env)
		body := mailFromA(t, "before the upgrade")
		old := []byte(`{"id":"snd_01accepted0before0upgrade","object":"send","status":"queued"}`)
		putPlain(t, env, sendScope("old-1"), fingerprint(t, body), idempotency.Response{Status: 200, ContentType: "application/json", Body: old})

		r := post(t, env, limited, "old-1", body)
		if r.Status != 200 || string(r.Body) != string(old) || r.Header.Get(replayedHeader) != "true" {
			t.Fatalf("retry after the upgrade: %d %s %q, want the stored answer replayed", r.Status, r.Body, r.Header.Get(replayedHeader))
		}
		if l := listByKey(t, env, env.AdminKey, "old-1"); len(l) != 0 {
			t.Fatalf("the retry made %d sends, want none", len(l))
		}

		putPlain(t, env, sendScope("claimed-1"), fingerprint(t, mailFromA(t, "someone else's")), idempotency.Response{Status: 200, ContentType: "application/json", Body: old})
		requireOriginal(t, post(t, env, limited, "claimed-1", body), http.StatusOK)

		// The form the version before named restricted keys' namespaces by
		// their limits stored: one per API key.
		limitedKey := keyBySecret(t, env, limited)
		putPlain(t, env, sendScope(core.KeyScopedIdempotencyKey(limitedKey, "old-2")), fingerprint(t, body), idempotency.Response{Status: 200, ContentType: "application/json", Body: old})
		r = post(t, env, limited, "old-2", body)
		if r.Status != 200 || string(r.Body) != string(old) || r.Header.Get(replayedHeader) != "true" {
			t.Fatalf("retry of a per-key record after the upgrade: %d %s, want the stored answer replayed", r.Status, r.Body)
		}
	})
}

// keyBySecret is the API key a secret authenticates as.
func keyBySecret(t *testing.T, env *sendoncetest.Env, secret string) *core.APIKey {
	t.Helper()
	k, err := env.Server.Service.Authenticate(context.Background(), secret)
	if err != nil {
		t.Fatalf("authenticate: %v", err)
	}
	return k
}
