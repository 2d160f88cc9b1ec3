package httpapi_test

import (
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// While PostgreSQL cannot be reached (here a proxy in front of it cuts
// every connection and refuses new ones, as a restart does), a send is
// answered 503 service_unavailable with Retry-After, not 500: nothing was
// stored, and the same key and body go through once the database is back.
func TestSend_DatabaseOutageIs503WithRetryAfter(t *testing.T) {
	env, px := sendoncetest.StartBehindProxy(t, sendoncetest.Options{NoWorkers: true})
	key, body := rand.Text(), sendoncetest.Mail("ann@example.com", "through an outage")

	px.Cut()
	for _, path := range []string{"/v1/send", "/emails"} {
		// Twice: the first request may be authenticated from the key
		// cache and fail at its transaction, the second fails earlier.
		for i := range 2 {
			r := env.Do(t, sendoncetest.Request{Method: "POST", Path: path, Key: env.AdminKey, IdemKey: key + path, Body: body})
			if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
				t.Fatalf("%s during the outage (try %d): %d Retry-After %q %s; want 503 with Retry-After",
					path, i+1, r.Status, r.Header.Get("Retry-After"), r.Body)
			}
			if path == "/v1/send" {
				if code := errCode(t, r); code != "service_unavailable" {
					t.Fatalf("error code %q, want service_unavailable", code)
				}
			}
		}
		time.Sleep(1100 * time.Millisecond) // past the key cache
	}
	px.Pass()

	var r *sendoncetest.Response
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if r = env.Send(t, key+"/v1/send", body); r.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
	}
	if r.Status != http.StatusOK || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("after the outage: %d replayed=%q %s; want a first 200 (the 503s stored nothing)",
			r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
	}
}

func errCode(t *testing.T, r *sendoncetest.Response) string {
	t.Helper()
	e, _ := r.JSON(t)["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}
