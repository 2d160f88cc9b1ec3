package delivery_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestDeliver_TransactionalBeforeBulkBacklog: a tenant queues a bulk
// backlog that takes its relay many seconds to drain, then a
// transactional password reset; the reset is sent within a couple of
// seconds while most of the backlog still waits (oldest first would have
// sent it after the backlog).
func TestDeliver_TransactionalBeforeBulkBacklog(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		relay := smtptest.Start(t, smtptest.Options{})
		relay.SetBehaviour(smtptest.Behaviour{DelayData: 20 * time.Millisecond})
		// Two sessions at 20 ms a message: about 100 messages a second.
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, Transport: "smtp://" + relay.Addr + "?tls=none&max_sessions=2"})
		post := func(idem string, body map[string]any) string {
			r := env.Send(t, idem, body)
			if r.Status != http.StatusOK {
				t.Fatalf("send: %d %s", r.Status, r.Body)
			}
			id, _ := r.JSON(t)["id"].(string)
			return id
		}
		const backlog = 5000
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for i := range backlog {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if _, err := env.TrySend(fmt.Sprintf("news-%d", i), map[string]any{"to": fmt.Sprintf("n%d@example.com", i), "subject": "news", "text": "x", "stream": "bulk"}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()

		start := time.Now()
		id := post("reset", map[string]any{"to": "ann@example.com", "subject": "reset", "text": "x"})
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
