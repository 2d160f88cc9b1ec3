package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestSealedAnswer_KeyChangedIs410: a webhook's create answer is stored
// sealed under SENDONCE_SECRET_KEY; after a restart with another secret
// key, a retry with the same Idempotency-Key cannot be shown it. It gets
// 410 stored_answer_unavailable — not a 500 that claims nothing was
// stored — and the create does not run again.
func TestSealedAnswer_KeyChangedIs410(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		first := sendoncetest.Start(t, sendoncetest.Options{Backend: b, NoWorkers: true, SecretKey: "the-first-secret-key-of-32-bytes!!"})
		body := map[string]any{"endpoint": "https://93.184.215.14/hook", "events": []string{"email.sent"}}
		if r := first.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/webhooks", Key: first.AdminKey, IdemKey: "hook-1", Body: body}); r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		first.Close()

		again := sendoncetest.Start(t, sendoncetest.Options{Backend: b, DB: first.DB, DBPath: first.DBPath, NoWorkers: true, SecretKey: "another-secret-key-of-32-bytes!!!!"})
		r := again.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/webhooks", Key: again.AdminKey, IdemKey: "hook-1", Body: body})
		if r.Status != http.StatusGone || r.ErrorCode() != "stored_answer_unavailable" {
			t.Fatalf("the retry after the key changed: %d %s, want 410 stored_answer_unavailable", r.Status, r.Body)
		}
		if n := again.QueryInt(t, `SELECT count(*) FROM webhooks`); n != 1 {
			t.Errorf("%d webhooks, want the first one only", n)
		}
	})
}
