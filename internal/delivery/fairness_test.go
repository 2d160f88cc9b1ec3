package delivery_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestDeliver_TenantsShareWorkersFairly: tenant A queues a backlog that
// takes its relay many seconds to drain; tenant B's ten sends, queued
// behind it, are delivered within a few seconds all the same, while most of
// A's backlog still waits (first come, first served would have delivered
// them after it).
func TestDeliver_TenantsShareWorkersFairly(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := slowRelayEnv(t, backend)
		_, keyA := env.NewKey(t, app.NewKeyParams{Name: "a", Tenant: "tenant-a", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}})
		_, keyB := env.NewKey(t, app.NewKeyParams{Name: "b", Tenant: "tenant-b", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}})
		const backlog = 1500
		queueBacklog(t, backlog, 16, func(i int) error {
			_, err := env.TrySendAs(keyA, fmt.Sprintf("a-%d", i), sendoncetest.Mail(fmt.Sprintf("a%d@example.com", i), "fair"))
			return err
		})

		start := time.Now()
		var ids []string
		for i := range 10 {
			id, err := env.TrySendAs(keyB, fmt.Sprintf("b-%d", i), sendoncetest.Mail(fmt.Sprintf("b%d@example.com", i), "fair"))
			if err != nil {
				t.Fatalf("tenant B's send: %v", err)
			}
			ids = append(ids, id)
		}
		for _, id := range ids {
			deadline := time.Now().Add(waitLong)
			for {
				r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/sends/" + id, Key: keyB})
				if st, _ := r.JSON(t)["status"].(string); st == string(core.StatusSent) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("tenant B's send %s not sent after %v", id, waitLong)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		took := time.Since(start)
		waiting := env.QueryInt(t, `SELECT count(*) FROM sends WHERE tenant = 'tenant-a' AND status IN ('queued', 'sending')`)
		t.Logf("tenant B's 10 sends took %v; tenant A still had %d of %d waiting", took, waiting, backlog)
		if took > 4*time.Second {
			t.Errorf("tenant B's sends took %v behind tenant A's backlog, want a few seconds at most", took)
		}
		if waiting < backlog/4 {
			t.Errorf("only %d of tenant A's sends were still waiting: the backlog was too short to tell", waiting)
		}
	})
}

// slowRelayEnv starts sendonce relaying to a recording server that takes
// 20 ms a message over two sessions: about 100 messages a second, so a
// backlog of thousands takes many seconds to drain.
func slowRelayEnv(t *testing.T, backend sendoncetest.Backend) *sendoncetest.Env {
	t.Helper()
	relay := smtptest.Start(t, smtptest.Options{})
	relay.SetBehaviour(smtptest.Behaviour{DelayData: 20 * time.Millisecond})
	return sendoncetest.Start(t, sendoncetest.Options{Backend: backend, Transport: "smtp://" + relay.Addr + "?tls=none&max_sessions=2"})
}

// queueBacklog calls send(i) for i in [0, n), par at a time, and returns
// when all have answered; a failed send fails the test.
func queueBacklog(t *testing.T, n, par int, send func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, par)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := send(i); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}
