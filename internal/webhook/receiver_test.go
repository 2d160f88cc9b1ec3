package webhook_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// received is one request an endpoint got.
type received struct {
	At     time.Time
	Header http.Header
	Body   []byte
}

// receiver is a real HTTP endpoint on 127.0.0.1 that answers the n-th
// request (from 1) with status(n) and records every request.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []received
	status func(n int) int
}

func newReceiver(t *testing.T, status func(n int) int) *receiver {
	t.Helper()
	rc := &receiver{status: status}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, received{At: time.Now(), Header: r.Header.Clone(), Body: body})
		n := len(rc.got)
		rc.mu.Unlock()
		w.WriteHeader(rc.status(n))
		_, _ = io.WriteString(w, "seen")
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// waitFor polls until the endpoint got n requests.
func (rc *receiver) waitFor(t *testing.T, n int, timeout time.Duration) []received {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if got := rc.requests(); len(got) >= n {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("endpoint got %d requests in %s, want %d", len(rc.requests()), timeout, n)
	return nil
}

// createWebhook makes a webhook through the API and returns its id and
// signing secret.
func createWebhook(t *testing.T, env *sendoncetest.Env, endpoint string, events ...string) (id, secret string) {
	t.Helper()
	r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/webhooks", Key: env.AdminKey, IdemKey: "wh-" + endpoint,
		Body: map[string]any{"endpoint": endpoint, "events": events}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create webhook: %d %s", r.Status, r.Body)
	}
	m := r.JSON(t)
	return m["id"].(string), m["signing_secret"].(string)
}

// sendOne accepts a send and returns its id.
func sendOne(t *testing.T, env *sendoncetest.Env, key string) string {
	t.Helper()
	r := env.Send(t, key, sendoncetest.Mail("ada@example.com", "Hello "+key))
	if r.Status != http.StatusOK {
		t.Fatalf("send: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)["id"].(string)
}
