package webhook_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

func getWebhook(t *testing.T, env *sendoncetest.Env, id string) map[string]any {
	t.Helper()
	r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/webhooks/" + id, Key: env.AdminKey})
	if r.Status != http.StatusOK {
		t.Fatalf("get webhook: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)
}

func waitWebhookStatus(t *testing.T, env *sendoncetest.Env, id string, want core.WebhookStatus) map[string]any {
	t.Helper()
	var w map[string]any
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if w = getWebhook(t, env, id); w["status"] == string(want) {
			return w
		}
	}
	t.Fatalf("webhook %v never became %s", w, want)
	return nil
}

// TestWebhook_GoneDisables: a 410 fails the delivery at once (no retry)
// and disables the endpoint; later events queue nothing for it.
func TestWebhook_GoneDisables(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		rc := newReceiver(t, func(int) int { return http.StatusGone })
		hookID, _ := createWebhook(t, env, rc.URL, "email.sent")
		sendOne(t, env, "gone-1")
		got := rc.waitFor(t, 1, 10*time.Second)
		w := waitWebhookStatus(t, env, hookID, core.WebhookDisabled)
		if !strings.Contains(w["disabled_reason"].(string), "410") {
			t.Errorf("disabled_reason %q does not name the 410", w["disabled_reason"])
		}
		waitDelivery(t, env, hookID, got[0].Header.Get("webhook-id"), core.DeliveryFailed)

		second := sendOne(t, env, "gone-2")
		env.WaitStatus(t, second, 10*time.Second, core.StatusSent)
		if n := env.QueryInt(t, `SELECT count(*) FROM webhook_deliveries WHERE send_id = ?`, second); n != 0 {
			t.Errorf("a disabled endpoint got %d deliveries queued", n)
		}
		time.Sleep(100 * time.Millisecond)
		if n := len(rc.requests()); n != 1 {
			t.Errorf("endpoint got %d requests, want the one that answered 410", n)
		}

		// Enabling it again subscribes it again.
		r := env.Do(t, sendoncetest.Request{Method: "PATCH", Path: "/v1/webhooks/" + hookID, Key: env.AdminKey, Body: map[string]any{"status": "enabled"}})
		if r.Status != http.StatusOK || r.JSON(t)["status"] != "enabled" {
			t.Fatalf("re-enable: %d %s", r.Status, r.Body)
		}
		third := sendOne(t, env, "gone-3")
		env.WaitStatus(t, third, 10*time.Second, core.StatusSent)
		if n := env.QueryInt(t, `SELECT count(*) FROM webhook_deliveries WHERE send_id = ?`, third); n != 1 {
			t.Errorf("re-enabled endpoint: %d deliveries queued, want 1", n)
		}
	})
}

// TestWebhook_ConsecutiveFailuresDisable: the delivery that makes
// MaxConsecutiveFailures failed deliveries in a row disables the endpoint.
func TestWebhook_ConsecutiveFailuresDisable(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{WebhookSchedule: "10ms"}, func(t *testing.T, env *sendoncetest.Env) {
		rc := newReceiver(t, func(int) int { return http.StatusServiceUnavailable })
		hookID, _ := createWebhook(t, env, rc.URL, "email.sent")
		env.Exec(t, `UPDATE webhooks SET failures = 9 WHERE id = ?`, hookID)
		sendOne(t, env, "fail-1")
		rc.waitFor(t, 2, 10*time.Second) // the attempt and its one retry
		w := waitWebhookStatus(t, env, hookID, core.WebhookDisabled)
		if w["disabled_reason"] != "10 deliveries in a row failed" {
			t.Errorf("disabled_reason %q", w["disabled_reason"])
		}
	})
}

// TestWebhook_SuccessResetsFailures: a delivered event ends the run.
func TestWebhook_SuccessResetsFailures(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{})
	rc := newReceiver(t, func(int) int { return http.StatusNoContent })
	hookID, _ := createWebhook(t, env, rc.URL, "email.sent")
	env.Exec(t, `UPDATE webhooks SET failures = 9 WHERE id = ?`, hookID)
	sendOne(t, env, "ok-1")
	got := rc.waitFor(t, 1, 10*time.Second)
	waitDelivery(t, env, hookID, got[0].Header.Get("webhook-id"), core.DeliverySuccess)
	if n := env.QueryInt(t, `SELECT failures FROM webhooks WHERE id = ?`, hookID); n != 0 {
		t.Errorf("failures %d after a success, want 0", n)
	}
}

// TestWebhook_RedirectNotFollowed: a 3xx is a failed attempt; its
// Location gets nothing.
func TestWebhook_RedirectNotFollowed(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{WebhookSchedule: "10ms"})
	target := newReceiver(t, func(int) int { return http.StatusOK })
	rc := newReceiver(t, func(int) int { return http.StatusFound })
	rc.Config.Handler = http.RedirectHandler(target.URL, http.StatusFound)
	hookID, _ := createWebhook(t, env, rc.URL, "email.sent")
	sendID := sendOne(t, env, "redirect-1")
	env.WaitStatus(t, sendID, 10*time.Second, core.StatusSent)
	d := waitDelivery(t, env, hookID, waitOneEvent(t, env, hookID), core.DeliveryFailed)
	if d["attempts"] != float64(2) {
		t.Errorf("delivery %v: want 2 attempts", d)
	}
	if n := len(target.requests()); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}
}

// TestWebhook_Tenants: another tenant sees none of a tenant's webhooks,
// and its sends queue nothing for them.
func TestWebhook_Tenants(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{})
	rc := newReceiver(t, func(int) int { return http.StatusOK })
	hookID, _ := createWebhook(t, env, rc.URL, "email.sent")
	_, other := env.NewKey(t, app.NewKeyParams{Name: "other", Tenant: "other", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead, core.ScopeAdmin}})
	for _, req := range []sendoncetest.Request{
		{Method: "GET", Path: "/v1/webhooks/" + hookID},
		{Method: "PATCH", Path: "/v1/webhooks/" + hookID, Body: map[string]any{"status": "disabled"}},
		{Method: "DELETE", Path: "/v1/webhooks/" + hookID},
		{Method: "GET", Path: "/v1/webhooks/" + hookID + "/events"},
		{Method: "POST", Path: "/v1/webhooks/" + hookID + "/signing-secret/rotate", IdemKey: "rot-other"},
	} {
		req.Key = other
		if r := env.Do(t, req); r.Status != http.StatusNotFound {
			t.Errorf("%s %s as another tenant: %d %s, want 404", req.Method, req.Path, r.Status, r.Body)
		}
	}
	if l := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/webhooks", Key: other}).JSON(t); len(l["data"].([]any)) != 0 {
		t.Errorf("another tenant lists %v", l["data"])
	}
	r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: other, IdemKey: "other-1", Body: sendoncetest.Mail("x@example.com", "x")})
	id := r.JSON(t)["id"].(string)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if env.QueryInt(t, `SELECT count(*) FROM send_events WHERE send_id = ? AND type = 'sent'`, id) == 1 {
			break
		}
	}
	if env.QueryInt(t, `SELECT count(*) FROM send_events WHERE send_id = ? AND type = 'sent'`, id) != 1 {
		t.Fatalf("the other tenant's send was not sent")
	}
	if n := env.QueryInt(t, `SELECT count(*) FROM webhook_deliveries`); n != 0 {
		t.Errorf("another tenant's send queued %d deliveries", n)
	}
}
