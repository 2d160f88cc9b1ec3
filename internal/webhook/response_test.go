package webhook_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestWebhook_FailedResponseKeptShortForAdminsOnly: of an endpoint's
// failed answer only the first 256 bytes are kept, and
// only admin keys see them; a read key gets the attempt without them.
func TestWebhook_FailedResponseKeptShortForAdminsOnly(t *testing.T) {
	long := "secret-page:" + strings.Repeat("x", 4096)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(long))
	}))
	defer hook.Close()
	env := sendoncetest.Start(t, sendoncetest.Options{WebhookSchedule: "10ms"})
	hookID, _ := createWebhook(t, env, hook.URL, "email.sent")
	sendOne(t, env, "response-1")
	eventID := waitOneEvent(t, env, hookID)
	waitDelivery(t, env, hookID, eventID, core.DeliveryFailed)
	if n := env.QueryInt(t, `SELECT max(length(response)) FROM webhook_attempts`); n > 256 {
		t.Errorf("%d bytes of a response kept, want at most %d", n, 256)
	}

	_, reader := env.NewKey(t, app.NewKeyParams{Name: "reader", Scopes: []core.Scope{core.ScopeRead}})
	path := "/v1/webhooks/" + hookID + "/events/" + eventID + "/attempts"
	for _, c := range []struct {
		key, want string
	}{{env.AdminKey, long[:256]}, {reader, ""}} {
		r := env.Do(t, sendoncetest.Request{Method: "GET", Path: path, Key: c.key})
		if r.Status != http.StatusOK {
			t.Fatalf("attempts: %d %s", r.Status, r.Body)
		}
		for _, a := range r.JSON(t)["data"].([]any) {
			if got := a.(map[string]any)["response"]; got != c.want {
				t.Errorf("key %.12s…: response %.40q (%d bytes), want %.40q", c.key, got, len(got.(string)), c.want)
			}
		}
	}
}
