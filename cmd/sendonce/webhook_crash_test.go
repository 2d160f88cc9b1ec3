package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/webhooksig"
)

// TestCrash_WebhookDeliveredAfterSIGKILL: a send's event whose webhook
// delivery has not succeeded when the real server is SIGKILLed — its first
// attempt got a 503, its retry is due — is delivered by the next process,
// with the same webhook-id and body and a valid signature. On SQLite and
// PostgreSQL.
func TestCrash_WebhookDeliveredAfterSIGKILL(t *testing.T) {
	eachDB(t, func(t *testing.T, _, db string) {
		webhookAfterKill(t, db)
	})
}

func webhookAfterKill(t *testing.T, db string) {
	var (
		up   atomic.Bool
		mu   sync.Mutex
		got  []http.Header
		body [][]byte
	)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, body = append(got, r.Header.Clone()), append(body, b)
		mu.Unlock()
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer rc.Close()
	requests := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }

	secret := createKey(t, db, "hooks", "send,read,admin")
	args := []string{"--db", db, "--poll-interval", "20ms", "--webhook-allow-private", "--webhook-retry-schedule", "1s,1s"}
	p := startServe(t, args...)
	call := func(method, url, key, payload string) map[string]any {
		t.Helper()
		status, b := apiCall(t, method, url, secret, key, payload)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil || status >= 300 {
			t.Fatalf("%s %s: %d %s %v", method, url, status, b, err)
		}
		return m
	}
	hook := call("POST", p.url+"/v1/webhooks", "hook-1", `{"endpoint":"`+rc.URL+`","events":["email.sent"]}`)
	whSecret := hook["signing_secret"].(string)
	call("POST", p.url+"/v1/send", "crash-hook-1", `{"to":"ada@example.com","subject":"Crash","text":"hello"}`)
	waitFor(t, 10*time.Second, "the first attempt at the endpoint", func() bool { return requests() >= 1 })
	mu.Lock()
	eventID := got[0].Get("webhook-id")
	mu.Unlock()
	// Killed once the 503 is recorded and the retry due: a kill during the
	// attempt itself would hold the delivery for its lease (30 s) first.
	delivery := p.url + "/v1/webhooks/" + hook["id"].(string) + "/events/" + eventID
	waitFor(t, 10*time.Second, "the 503 recorded", func() bool { return call("GET", delivery, "", "")["status"] == "pending" })
	p.sigkill(t)
	before := requests()
	up.Store(true)

	p = startServe(t, args...)
	waitFor(t, 15*time.Second, "the delivery after the restart", func() bool { return requests() > before })
	mu.Lock()
	first, last, lastBody := got[0], got[len(got)-1], body[len(body)-1]
	mu.Unlock()
	if last.Get("webhook-id") != first.Get("webhook-id") || string(lastBody) != string(body[0]) {
		t.Errorf("after the restart: webhook-id %q and body %s; before: %q and %s",
			last.Get("webhook-id"), lastBody, first.Get("webhook-id"), body[0])
	}
	if err := webhooksig.Verify(whSecret, last, lastBody, 0, time.Now()); err != nil {
		t.Errorf("signature after the restart: %v", err)
	}
	delivery = p.url + "/v1/webhooks/" + hook["id"].(string) + "/events/" + eventID
	waitFor(t, 10*time.Second, "the delivery recorded success", func() bool { return call("GET", delivery, "", "")["status"] == "success" })
}
