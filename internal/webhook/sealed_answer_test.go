package webhook_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestWebhook_StoredAnswerSealed: with SENDONCE_SECRET_KEY the answer to a
// webhook's create and rotate — which carries the signing secret and is
// kept for the key's retries — is stored sealed: the database does not
// hold the secret, and a retry with the same key still gets the same
// bytes, secret included. Without a secret key it is stored as answered.
func TestWebhook_StoredAnswerSealed(t *testing.T) {
	for _, c := range []struct {
		name, secretKey string
		sealed          bool
	}{{"sealed", "a-deployment-secret-key-of-32-bytes!", true}, {"plain", "", false}} {
		t.Run(c.name, func(t *testing.T) {
			env := sendoncetest.Start(t, sendoncetest.Options{SecretKey: c.secretKey})
			create := sendoncetest.Request{Method: "POST", Path: "/v1/webhooks", Key: env.AdminKey, IdemKey: "hook-1",
				Body: map[string]any{"endpoint": "https://93.184.215.14/hook", "events": []string{"email.sent"}}}
			first := env.Do(t, create)
			if first.Status != http.StatusCreated || !bytes.Contains(first.Body, []byte("whsec_")) {
				t.Fatalf("create: %d %s", first.Status, first.Body)
			}
			again := env.Do(t, create)
			if again.Status != first.Status || !bytes.Equal(again.Body, first.Body) {
				t.Fatalf("the retry got %d %s, want the first answer byte for byte", again.Status, again.Body)
			}
			id := first.JSON(t)["id"].(string)
			rotate := sendoncetest.Request{Method: "POST", Path: "/v1/webhooks/" + id + "/signing-secret/rotate", Key: env.AdminKey, IdemKey: "rot-1"}
			r1, r2 := env.Do(t, rotate), env.Do(t, rotate)
			if r1.Status != http.StatusOK || !bytes.Equal(r1.Body, r2.Body) || !strings.Contains(string(r1.Body), "whsec_") {
				t.Fatalf("rotate and its retry: %d %s / %s", r1.Status, r1.Body, r2.Body)
			}
			plain := env.QueryInt(t, `SELECT count(*) FROM idempotency_keys WHERE CAST(body AS TEXT) LIKE '%whsec_%'`)
			if c.sealed && plain != 0 {
				t.Errorf("%d stored answers hold a signing secret in the clear", plain)
			}
			if !c.sealed && plain != 2 {
				t.Errorf("without a secret key, %d stored answers hold the secret, want 2 (the check must see them)", plain)
			}
		})
	}
}
