package outbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/faultproxy"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/syncbuf"
	"github.com/sendonce/sendonce/outbox"
)

// child is an outbox process: this test binary run with childEnv.
type child struct {
	cmd *exec.Cmd
	out *syncbuf.Buffer
}

func startChild(t *testing.T, st *store, apiURL, apiKey string, n int) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1",
		"OUTBOX_DIALECT="+string(st.dialect), "OUTBOX_DSN="+st.dsn, "OUTBOX_TABLE="+st.table,
		"OUTBOX_API_URL="+apiURL, "OUTBOX_API_KEY="+apiKey, fmt.Sprintf("OUTBOX_CHILD_N=%d", n))
	c := &child{cmd: cmd, out: &syncbuf.Buffer{}}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start outbox child: %v", err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return c
}

func (c *child) kill(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal child: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		if sig == syscall.SIGTERM && err != nil {
			t.Errorf("child after SIGTERM: %v\n%s", err, c.out.String())
		}
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		t.Fatalf("child did not exit after %v\n%s", sig, c.out.String())
	}
}

// waitCounts polls the table until cond holds (bounded) and returns the
// counts that satisfied it.
func waitCounts(t *testing.T, ob *outbox.Outbox, what string, timeout time.Duration, cond func(map[outbox.State]int) bool) map[outbox.State]int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		counts, err := ob.Counts(bg(t))
		if err != nil {
			t.Fatal(err)
		}
		if cond(counts) {
			return counts
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: counts %v after %v", what, counts, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestOutbox_SurvivesSIGKILL runs the outbox in a child process, SIGKILLs
// it twice while tasks are in flight (the proxy holds every first answer,
// so the server has accepted sends the child has not recorded yet),
// restarts it, and checks that every task ends sent exactly once.
func TestOutbox_SurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs child processes")
	}
	h := startServer(t, sendoncetest.Options{})
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t)
		px := faultproxy.Start(t, faultproxy.Options{Upstream: h.env.URL, Delay: 400 * time.Millisecond,
			Plan: faultproxy.FirstPerKey("/v1/send", faultproxy.Delay, 1)})
		ob := newOutbox(t, st.db, st, nil, nil) // reads only
		const n = 10
		recs := enqueue(t, ob, st.db, n, b.name+" sigkill")

		inFlightAtKill := 0
		c := startChild(t, st, px.URL, h.env.AdminKey, 1)
		waitCounts(t, ob, "first sends", 20*time.Second, func(m map[outbox.State]int) bool {
			return m[outbox.Sent] >= 2 && m[outbox.Sending] >= 1
		})
		c.kill(t, syscall.SIGKILL)
		inFlightAtKill += waitCounts(t, ob, "", time.Second, func(map[outbox.State]int) bool { return true })[outbox.Sending]

		c = startChild(t, st, px.URL, h.env.AdminKey, 2)
		waitCounts(t, ob, "more sends", 20*time.Second, func(m map[outbox.State]int) bool {
			return m[outbox.Sent] >= n/2 && m[outbox.Sending] >= 1
		})
		c.kill(t, syscall.SIGKILL)
		inFlightAtKill += waitCounts(t, ob, "", time.Second, func(map[outbox.State]int) bool { return true })[outbox.Sending]

		c = startChild(t, st, px.URL, h.env.AdminKey, 3)
		waitCounts(t, ob, "every task settled", 30*time.Second, func(m map[outbox.State]int) bool {
			return m[outbox.Pending]+m[outbox.Sending] == 0
		})
		c.kill(t, syscall.SIGTERM)

		recs = settle(t, ob, recs, time.Second)
		tl := h.exactlyOnce(t, recs)
		retried := 0
		for _, r := range recs {
			if r.Attempts > 1 {
				retried++
			}
		}
		if inFlightAtKill == 0 || retried == 0 {
			t.Errorf("in flight at the kills: %d, tasks attempted more than once: %d; the kills hit nothing", inFlightAtKill, retried)
		}
		posts := px.Count("POST", "/v1/send")
		t.Logf("MEASURED %s/sigkill: tasks=%d kills=2 in-flight-at-kill=%d tasks-retried=%d posts=%d sends=%d duplicates=%d relayed=%d",
			b.name, tl.tasks, inFlightAtKill, retried, posts, tl.sends, tl.duplicates, tl.relayed)
		if t.Failed() {
			t.Logf("last child's output:\n%s", c.out.String())
		}
	})
}
