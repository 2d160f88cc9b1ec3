package webhook_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestWebhook_SlowTenantLeavesWorkersToOthers: eight slow endpoints of
// one tenant, each with more deliveries due than the per-endpoint bound,
// hold at most half of the process's 32 webhook workers, so another
// tenant's delivery to a fast endpoint goes out at once instead of
// waiting behind them.
func TestWebhook_SlowTenantLeavesWorkersToOthers(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		var running, most atomic.Int32
		release := make(chan struct{})
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			select {
			case <-release:
			case <-time.After(8 * time.Second):
			}
		}))
		defer slow.Close()
		defer close(release) // before slow.Close, which waits for its handlers
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
		for deadline := time.Now().Add(10 * time.Second); running.Load() < 16 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		}
		time.Sleep(300 * time.Millisecond) // room for claims past the bound
		if got := most.Load(); got != 16 {
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
