package httpapi_test

import (
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// An agent key is audited on every route that creates sends, not only on
// POST /v1/send, and a send cap's 429 says when to come back
// (Retry-After) on every one of them.
func TestAudit_EverySendRouteAuditsAgentsAndSaysRetryAfter(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		// Resend's routes need a from, which agent keys may not set: there
		// the request is audited for the intent it carries.
		routes := []struct {
			path  string
			body  any
			agent bool
		}{
			{"/v1/send", sendoncetest.Mail("ada@example.com", "native"), true},
			{"/api/public/v1/mailboxes/default/send", sendoncetest.Mail("ada@example.com", "mailera"), true},
			{"/emails", map[string]any{"from": "sender@example.com", "to": "ada@example.com", "subject": "resend", "text": "hi"}, false},
			{"/emails/batch", []map[string]any{{"from": "sender@example.com", "to": "ada@example.com", "subject": "batch", "text": "hi"}}, false},
		}
		for _, rt := range routes {
			t.Run(rt.path, func(t *testing.T) {
				key, secret := env.NewKey(t, app.NewKeyParams{Name: "agent " + rt.path, Scopes: []core.Scope{core.ScopeSend},
					Agent: rt.agent, MaxPerHour: 1})
				intent := map[string]string{kit.IntentHeader: `{"task":"welcome"}`}
				first := env.Do(t, sendoncetest.Request{Method: "POST", Path: rt.path, Key: secret, IdemKey: "first", Body: rt.body, Header: intent})
				if first.Status != 200 {
					t.Fatalf("first send: %d %s", first.Status, first.Body)
				}
				capped := env.Do(t, sendoncetest.Request{Method: "POST", Path: rt.path, Key: secret, IdemKey: "second", Body: rt.body, Header: intent})
				if capped.Status != 429 || capped.Header.Get("Retry-After") == "" {
					t.Fatalf("over the cap: %d, Retry-After %q; want 429 with Retry-After", capped.Status, capped.Header.Get("Retry-After"))
				}
				created := env.QueryInt(t, `SELECT COUNT(*) FROM audit_log WHERE api_key_id = ? AND outcome = 'created'
					AND idempotency_key = 'first' AND send_id <> ''`, key.ID)
				refused := env.QueryInt(t, `SELECT COUNT(*) FROM audit_log WHERE api_key_id = ? AND outcome = 'refused'
					AND status = 429 AND code = 'rate_limited'`, key.ID)
				if created != 1 || refused != 1 {
					t.Fatalf("audit log of %s: %d created, %d refused; want 1 and 1", rt.path, created, refused)
				}
			})
		}
	})
}
