package webhook_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/webhooksig"
)

// TestWebhook_RetriesWithSameIDAndValidSignatures: an endpoint that fails
// the first two attempts gets the third; every attempt carries the same
// webhook-id and body, a signature that verifies, and the retries come no
// sooner than the schedule (50ms, then 100ms) says.
func TestWebhook_RetriesWithSameIDAndValidSignatures(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{WebhookSchedule: "50ms,100ms"}, func(t *testing.T, env *sendoncetest.Env) {
		rc := newReceiver(t, func(n int) int {
			if n <= 2 {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		})
		hookID, secret := createWebhook(t, env, rc.URL, "email.sent")
		sendID := sendOne(t, env, "retry-1")
		got := rc.waitFor(t, 3, 15*time.Second)

		id := got[0].Header.Get("webhook-id")
		for i, g := range got {
			if g.Header.Get("webhook-id") != id {
				t.Errorf("attempt %d: webhook-id %q, want %q on every retry", i+1, g.Header.Get("webhook-id"), id)
			}
			if string(g.Body) != string(got[0].Body) {
				t.Errorf("attempt %d: body differs from the first attempt's", i+1)
			}
			if err := webhooksig.Verify(secret, g.Header, g.Body, 0, time.Now()); err != nil {
				t.Errorf("attempt %d: signature: %v", i+1, err)
			}
		}
		if gap := got[1].At.Sub(got[0].At); gap < 50*time.Millisecond {
			t.Errorf("first retry after %s, before the schedule's 50ms", gap)
		}
		if gap := got[2].At.Sub(got[1].At); gap < 100*time.Millisecond {
			t.Errorf("second retry after %s, before the schedule's 100ms", gap)
		}
		var p struct {
			Type string `json:"type"`
			Data struct {
				EmailID string   `json:"email_id"`
				To      []string `json:"to"`
				Subject string   `json:"subject"`
			} `json:"data"`
		}
		if err := json.Unmarshal(got[0].Body, &p); err != nil {
			t.Fatalf("body: %v: %s", err, got[0].Body)
		}
		if p.Type != "email.sent" || p.Data.EmailID != sendID || p.Data.Subject != "Hello retry-1" || len(p.Data.To) != 1 {
			t.Errorf("payload %s: want email.sent of %s", got[0].Body, sendID)
		}

		// The event's id is the webhook-id, on the send's history too.
		s := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/sends/" + sendID, Key: env.AdminKey}).JSON(t)
		found := false
		for _, e := range s["events"].([]any) {
			ev := e.(map[string]any)
			found = found || (ev["type"] == core.EventSent && ev["id"] == id)
		}
		if !found {
			t.Errorf("send history %v has no sent event with id %s", s["events"], id)
		}

		d := waitDelivery(t, env, hookID, id, core.DeliverySuccess)
		if d["attempts"] != float64(3) || d["next_attempt_at"] != nil {
			t.Errorf("delivery %v: want 3 attempts and no next attempt", d)
		}
		as := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/webhooks/" + hookID + "/events/" + id + "/attempts", Key: env.AdminKey}).JSON(t)
		var codes []float64
		for _, a := range as["data"].([]any) {
			codes = append(codes, a.(map[string]any)["http_status_code"].(float64))
		}
		if len(codes) != 3 || codes[0] != 200 || codes[1] != 500 || codes[2] != 500 {
			t.Errorf("attempts, newest first: %v, want [200 500 500]", codes)
		}
	})
}

// waitDelivery polls GET /v1/webhooks/{id}/events/{event_id} until the
// delivery has status want.
// waitOneEvent waits until the webhook has its one event and returns the
// event's id.
func waitOneEvent(t *testing.T, env *sendoncetest.Env, hookID string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		l := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/webhooks/" + hookID + "/events", Key: env.AdminKey}).JSON(t)
		if data := l["data"].([]any); len(data) == 1 {
			return data[0].(map[string]any)["id"].(string)
		}
	}
	t.Fatalf("webhook %s: no event within 10s", hookID)
	return ""
}

func waitDelivery(t *testing.T, env *sendoncetest.Env, hookID, eventID string, want core.DeliveryStatus) map[string]any {
	t.Helper()
	var last map[string]any
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/webhooks/" + hookID + "/events/" + eventID, Key: env.AdminKey})
		if r.Status != http.StatusOK {
			t.Fatalf("get delivery: %d %s", r.Status, r.Body)
		}
		if last = r.JSON(t); last["status"] == string(want) {
			return last
		}
	}
	t.Fatalf("delivery %v never became %s", last, want)
	return nil
}
