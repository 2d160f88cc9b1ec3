package webhook_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestWebhook_EndpointValidation: what create and update refuse, with
// 422 on param endpoint or events, and the private ranges only under
// --webhook-allow-private.
func TestWebhook_EndpointValidation(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{StrictOutbound: true, NoWorkers: true})
	for _, c := range []struct {
		name, endpoint string
		events         []string
		param          string
	}{
		{"not http", "ftp://example.com/hook", []string{"email.sent"}, "endpoint"},
		{"not absolute", "/hook", []string{"email.sent"}, "endpoint"},
		{"too long", "https://example.com/" + strings.Repeat("a", 2048), []string{"email.sent"}, "endpoint"},
		{"user info", "https://u:p@example.com/", []string{"email.sent"}, "endpoint"},
		{"loopback", "http://127.0.0.1:9/hook", []string{"email.sent"}, "endpoint"},
		{"private", "http://10.1.2.3/hook", []string{"email.sent"}, "endpoint"},
		{"localhost", "http://localhost:9/hook", []string{"email.sent"}, "endpoint"},
		{"link-local metadata", "http://169.254.169.254/latest", []string{"email.sent"}, "endpoint"},
		{"IPv6 loopback", "http://[::1]:9/", []string{"email.sent"}, "endpoint"},
		{"no events", "https://example.com/hook", nil, "events"},
		{"unknown event", "https://example.com/hook", []string{"email.opened"}, "events"},
	} {
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/webhooks", Key: env.AdminKey, IdemKey: "v-" + strings.ReplaceAll(c.name, " ", "-"),
			Body: map[string]any{"endpoint": c.endpoint, "events": c.events}})
		if r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != core.CodeValidation {
			t.Errorf("%s: %d %s, want 422 validation_error", c.name, r.Status, r.Body)
			continue
		}
		if p := r.JSON(t)["error"].(map[string]any)["param"]; p != c.param {
			t.Errorf("%s: param %v, want %s", c.name, p, c.param)
		}
	}
	if n := env.QueryInt(t, `SELECT count(*) FROM webhooks`); n != 0 {
		t.Errorf("%d webhooks stored from refused requests", n)
	}
	// A public address is fine; patching it to a private one is not.
	r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/webhooks", Key: env.AdminKey, IdemKey: "v-ok",
		Body: map[string]any{"endpoint": "https://93.184.215.14/hook", "events": []string{"email.sent", "email.sent", "email.failed"}}})
	if r.Status != http.StatusCreated {
		t.Fatalf("public endpoint: %d %s", r.Status, r.Body)
	}
	w := r.JSON(t)
	if !strings.HasPrefix(w["signing_secret"].(string), "whsec_") || len(w["events"].([]any)) != 2 {
		t.Errorf("created %v: want a whsec_ secret and the events without the duplicate", w)
	}
	id := w["id"].(string)
	if g := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/webhooks/" + id, Key: env.AdminKey}); strings.Contains(string(g.Body), "whsec_") {
		t.Errorf("GET shows the secret: %s", g.Body)
	}
	p := env.Do(t, sendoncetest.Request{Method: "PATCH", Path: "/v1/webhooks/" + id, Key: env.AdminKey, Body: map[string]any{"endpoint": "http://192.168.1.1/"}})
	if p.Status != http.StatusUnprocessableEntity {
		t.Errorf("patch to a private endpoint: %d %s", p.Status, p.Body)
	}
	p = env.Do(t, sendoncetest.Request{Method: "PATCH", Path: "/v1/webhooks/" + id, Key: env.AdminKey, Body: map[string]any{"status": "paused"}})
	if p.Status != http.StatusUnprocessableEntity {
		t.Errorf("patch to status paused: %d %s", p.Status, p.Body)
	}
	if ep := getWebhook(t, env, id)["endpoint"]; ep != "https://93.184.215.14/hook" {
		t.Errorf("endpoint %v after refused patches", ep)
	}
}

// TestWebhook_AllowPrivate: --webhook-allow-private lets a loopback
// endpoint be created and delivered to, with --outbound-allow at its
// default.
func TestWebhook_AllowPrivate(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{StrictOutbound: true, WebhookAllowPrivate: true})
	rc := newReceiver(t, func(int) int { return http.StatusOK })
	createWebhook(t, env, rc.URL, "email.sent")
	sendOne(t, env, "private-1")
	rc.waitFor(t, 1, 10*time.Second)
}

// TestWebhook_PrivateRefusedAtConnect: an endpoint that reaches a private
// address only when connected to (stored before, or a name that resolves
// differently now) is refused by the dialer: no request arrives, and the
// attempt says why.
func TestWebhook_PrivateRefusedAtConnect(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{StrictOutbound: true, WebhookSchedule: "10ms"}, func(t *testing.T, env *sendoncetest.Env) {
		rc := newReceiver(t, func(int) int { return http.StatusOK })
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/webhooks", Key: env.AdminKey, IdemKey: "c-1",
			Body: map[string]any{"endpoint": "https://93.184.215.14/hook", "events": []string{"email.sent"}}})
		id := r.JSON(t)["id"].(string)
		// As if DNS now pointed the endpoint's name at the loopback.
		env.Exec(t, `UPDATE webhooks SET endpoint = ? WHERE id = ?`, rc.URL, id)
		sendOne(t, env, "connect-1")
		eventID := waitOneEvent(t, env, id)
		waitDelivery(t, env, id, eventID, core.DeliveryFailed)
		as := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/webhooks/" + id + "/events/" + eventID + "/attempts", Key: env.AdminKey}).JSON(t)
		a := as["data"].([]any)[0].(map[string]any)
		if !strings.Contains(a["error"].(string), "not one sendonce may connect to") || a["http_status_code"] != float64(0) {
			t.Errorf("attempt %v: want a refusal by the outbound policy", a)
		}
		// A class, not the error's text: no address for a DNS oracle.
		if strings.Contains(a["error"].(string), "127.0.0.1") {
			t.Errorf("the attempt shows the address the name resolved to: %v", a["error"])
		}
		if n := len(rc.requests()); n != 0 {
			t.Errorf("the private endpoint got %d requests", n)
		}
	})
}
