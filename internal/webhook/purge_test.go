package webhook_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestWebhook_RetentionPurgesFinishedDeliveries: --retention's purge
// deletes a finished delivery and its attempts once its event is older
// than the cutoff, and keeps it while it is younger and while it is
// pending.
func TestWebhook_RetentionPurgesFinishedDeliveries(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{WebhookSchedule: "1h"}, func(t *testing.T, env *sendoncetest.Env) {
		rc := newReceiver(t, func(n int) int {
			if n == 1 {
				return http.StatusOK
			}
			return http.StatusInternalServerError // the second event's delivery stays pending (retry in 1h)
		})
		createWebhook(t, env, rc.URL, "email.sent")
		sendOne(t, env, "purge-1")
		rc.waitFor(t, 1, 15*time.Second)
		sendOne(t, env, "purge-2")
		rc.waitFor(t, 2, 15*time.Second)
		count := func(q string) int { return env.QueryInt(t, q) }
		waitCount(t, func() int { return count(`SELECT count(*) FROM webhook_attempts`) }, 2)

		ctx := context.Background()
		if _, err := env.Server.Store.PurgeSends(ctx, time.Now().Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		if n := count(`SELECT count(*) FROM webhook_deliveries`); n != 2 {
			t.Fatalf("a cutoff before the events purged deliveries: %d left, want 2", n)
		}
		if _, err := env.Server.Store.PurgeSends(ctx, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if n := count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'success'`); n != 0 {
			t.Errorf("%d finished deliveries older than the cutoff kept", n)
		}
		if n := count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'pending'`); n != 1 {
			t.Errorf("%d pending deliveries, want the one still to retry", n)
		}
		if n := count(`SELECT count(*) FROM webhook_attempts`); n != 1 {
			t.Errorf("%d attempts left, want only the pending delivery's one", n)
		}
	})
}

func waitCount(t *testing.T, f func() int, want int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if f() == want {
			return
		}
	}
	t.Fatalf("count %d, want %d", f(), want)
}
