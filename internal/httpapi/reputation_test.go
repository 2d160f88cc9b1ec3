package httpapi_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// GET /v1/reputation answers exactly the contract's shape, with the
// server's thresholds; a read key may look but not resume, a send key
// may not look; an admin's resume takes an Idempotency-Key and its retry
// is a replay. (The pause itself: internal/delivery's reputation tests.)
func TestReputation_ShapeAndScopes(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, NoWorkers: true,
			Reputation: app.ReputationThresholds{ComplaintRate: 0.01, BounceRate: 0.1, MinSends: 42}})
		_, read := env.NewKey(t, app.NewKeyParams{Name: "reader", Scopes: []core.Scope{core.ScopeRead}})
		_, send := env.NewKey(t, app.NewKeyParams{Name: "sender", Scopes: []core.Scope{core.ScopeSend}})

		r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/reputation", Key: read})
		if r.Status != http.StatusOK {
			t.Fatalf("GET /v1/reputation with a read key: %d %s", r.Status, r.Body)
		}
		var got map[string]any
		if err := json.Unmarshal(r.Body, &got); err != nil {
			t.Fatal(err)
		}
		if keys := slices.Sorted(maps.Keys(got)); !slices.Equal(keys, []string{"bounce_rate", "complaint_rate", "state", "thresholds", "window_sends"}) {
			t.Errorf("fields %v, want exactly state, complaint_rate, bounce_rate, window_sends, thresholds", keys)
		}
		th, _ := got["thresholds"].(map[string]any)
		if want := map[string]any{"complaint_rate": 0.01, "bounce_rate": 0.1, "min_sends": float64(42)}; !maps.Equal(th, want) {
			t.Errorf("thresholds %v, want %v", th, want)
		}
		if got["state"] != "active" || got["complaint_rate"] != 0.0 || got["bounce_rate"] != 0.0 || got["window_sends"] != 0.0 {
			t.Errorf("a tenant without mail: %v, want active with zero rates and sends", got)
		}

		if r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/reputation", Key: send}); r.Status != http.StatusForbidden {
			t.Errorf("GET with a send-only key: %d, want 403", r.Status)
		}
		for _, key := range []string{read, send} {
			r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/reputation/resume", Key: key, IdemKey: "resume"})
			if r.Status != http.StatusForbidden || r.ErrorCode() != string(core.CodeForbidden) {
				t.Errorf("resume without admin: %d %s, want 403 forbidden", r.Status, r.Body)
			}
		}
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/reputation/resume"}); r.Status != http.StatusUnauthorized {
			t.Errorf("resume without a key: %d, want 401", r.Status)
		}

		first := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/reputation/resume", Key: env.AdminKey, IdemKey: "resume"})
		if first.Status != http.StatusOK || first.JSON(t)["state"] != "active" {
			t.Fatalf("resume with an admin key: %d %s, want 200 active", first.Status, first.Body)
		}
		again := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/reputation/resume", Key: env.AdminKey, IdemKey: "resume"})
		if again.Status != http.StatusOK || again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.Body) {
			t.Errorf("the resume's retry: %d %q %s, want the first answer replayed", again.Status, again.Header.Get("Idempotent-Replayed"), again.Body)
		}
	})
}
