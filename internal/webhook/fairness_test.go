package webhook_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/holdtest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestWebhook_SlowTenantLeavesWorkersToOthers: eight slow endpoints of
// one tenant, each with more deliveries due than the per-endpoint bound,
// hold at most half of the process's 32 webhook workers, so another
// tenant's delivery to a fast endpoint goes out at once instead of
// waiting behind them.
func TestWebhook_SlowTenantLeavesWorkersToOthers(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		slow := holdtest.Start(t, 8*time.Second, nil)
		defer slow.Release() // before sendonce stops, which waits for its attempts
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b})
		for i := range 8 {
			createWebhook(t, env, fmt.Sprintf("%s/a%d", slow.URL, i), "email.sent")
		}
		fast := newReceiver(t, func(int) int { return http.StatusOK })
		_, other := env.NewKey(t, app.NewKeyParams{Name: "b", Tenant: "b", Scopes: []core.Scope{core.ScopeSend, core.ScopeAdmin}})
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/webhooks", Key: other, IdemKey: "wh-b",
			Body: map[string]any{"endpoint": fast.URL, "events": []string{"email.sent"}}}); r.Status != http.StatusCreated {
			t.Fatalf("create tenant b's webhook: %d %s", r.Status, r.Body)
		}

		for i := range 6 { // 48 deliveries due, 8 endpoints × 4 could run
			sendOne(t, env, fmt.Sprint("a-", i))
		}
		if got := slow.PeakAfter(16, 10*time.Second, 300*time.Millisecond); got != 16 {
			t.Errorf("tenant a's slow endpoints held %d attempts at once, want 16 (half the workers)", got)
		}

		start := time.Now()
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: other, IdemKey: "b-1",
			Body: sendoncetest.Mail("bob@example.com", "from b")}); r.Status != http.StatusOK {
			t.Fatalf("tenant b's send: %d %s", r.Status, r.Body)
		}
		fast.waitFor(t, 1, 4*time.Second)
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("tenant b's delivery took %v behind tenant a's slow endpoints", d)
		}
	})
}
