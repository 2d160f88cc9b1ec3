package delivery_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestDeliver_TransactionalBeforeBulkBacklog: a tenant queues a bulk
// backlog that takes its relay many seconds to drain, then a
// transactional password reset; the reset is sent within a couple of
// seconds while most of the backlog still waits (oldest first would have
// sent it after the backlog).
func TestDeliver_TransactionalBeforeBulkBacklog(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := slowRelayEnv(t, backend)
		const backlog = 5000
		queueBacklog(t, backlog, 16, func(i int) error {
			_, err := env.TrySend(fmt.Sprintf("news-%d", i), map[string]any{"to": fmt.Sprintf("n%d@example.com", i), "subject": "news", "text": "x", "stream": "bulk"})
			return err
		})

		start := time.Now()
		id := send(t, env, map[string]any{"to": "ann@example.com", "subject": "reset", "text": "x"})
		env.WaitStatus(t, id, waitLong, core.StatusSent)
		took := time.Since(start)
		waiting := env.QueryInt(t, `SELECT count(*) FROM sends WHERE stream = 'bulk' AND status IN ('queued', 'sending')`)
		t.Logf("the reset took %v; %d of %d bulk sends still waited", took, waiting, backlog)
		if took > 2*time.Second {
			t.Errorf("the transactional reset took %v behind the bulk backlog, want a second or two at most", took)
		}
		if waiting < backlog/4 {
			t.Errorf("only %d bulk sends were still waiting: the backlog was too short to tell", waiting)
		}
	})
}
