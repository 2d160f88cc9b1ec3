package httpapi_test

import (
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/resendtest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestMailboxTransport_SealedAtRest: a mailbox's provider credentials
// (resend://KEY@…) are kept sealed in the database, never shown back, and
// sending through the mailbox still uses them; a row written before
// sealing (the URL as given) still sends.
func TestMailboxTransport_SealedAtRest(t *testing.T) {
	const key = "re_sup3rs3cret"
	rs := resendtest.Start(t, key)
	sendoncetest.EachEnv(t, sendoncetest.Options{SecretKey: strings.Repeat("s", 32)}, func(t *testing.T, env *sendoncetest.Env) {
		url := "resend://" + key + "@" + rs.Host + "?tls=none"
		for _, id := range []string{"prov", "old"} {
			if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: rand.Text(),
				Body: map[string]any{"id": id, "address": id + "@example.com", "transport": url}}); r.Status != 201 {
				t.Fatalf("create mailbox %s: %d %s", id, r.Status, r.Body)
			}
		}
		if n := env.QueryInt(t, `SELECT count(*) FROM mailboxes WHERE transport LIKE '%sup3rs3cret%'`); n != 0 {
			t.Fatalf("%d mailbox rows hold the provider's key as given", n)
		}
		// As a row written before sealing was.
		env.Exec(t, `UPDATE mailboxes SET transport = ? WHERE id = 'old'`, url)
		r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/mailboxes", Key: env.AdminKey})
		if strings.Contains(string(r.Body), "sup3rs3cret") || strings.Count(string(r.Body), "resend://") != 2 {
			t.Errorf("GET /v1/mailboxes: %s, want both transports shown redacted", r.Body)
		}
		for _, id := range []string{"prov", "old"} {
			r := env.Send(t, rand.Text(), map[string]any{"mailbox_id": id, "to": "ann@example.com", "subject": "Hello " + id, "text": "Hi."})
			if r.Status != 200 {
				t.Fatalf("send from %s: %d %s", id, r.Status, r.Body)
			}
			env.WaitStatus(t, r.JSON(t)["id"].(string), 20*time.Second, core.StatusSent)
		}
	})
}
