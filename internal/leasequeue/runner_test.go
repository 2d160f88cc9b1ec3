package leasequeue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// queue is a due list claimed under the runner's rules: the seam the
// runner is about (the real queues are the store's tables, tested with
// their users in delivery, webhook and imapsync).
type queue struct {
	mu      sync.Mutex
	due     []int
	claims  int
	failFor int // the first failFor claims fail
}

func (q *queue) claim(_ context.Context, n int) ([]int, bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.claims++
	if q.claims <= q.failFor {
		return nil, false, errors.New("database down")
	}
	n = min(n, len(q.due))
	got := q.due[:n:n]
	q.due = q.due[n:]
	return got, false, nil
}

// TestRunner_WorksEveryRowOnceWithinItsWorkers: a backlog larger than the
// workers is worked completely, each row once, never more than Workers at
// once, without waiting for the poll between full claims.
func TestRunner_WorksEveryRowOnceWithinItsWorkers(t *testing.T) {
	q := &queue{}
	for i := range 200 {
		q.due = append(q.due, i)
	}
	var running, peak atomic.Int32
	seen := make([]atomic.Int32, 200)
	var wg sync.WaitGroup
	wg.Add(200)
	r := New(Config[int]{Name: "test", Workers: 4, Poll: time.Hour, Claim: q.claim, Work: func(_ context.Context, j int) {
		defer wg.Done()
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(time.Millisecond)
		seen[j].Add(1)
		running.Add(-1)
	}})
	r.Start()
	waitOrFail(t, &wg, 30*time.Second, "the backlog was not worked (a full claim waited for the hour-long poll?)")
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if n := seen[i].Load(); n != 1 {
			t.Fatalf("row %d worked %d times, want 1", i, n)
		}
	}
	if p := peak.Load(); p > 4 {
		t.Fatalf("%d rows worked at once, Workers is 4", p)
	}
}

// TestRunner_ClaimFailuresAreRetriedAtThePoll: a claim that fails (the
// database down) leaves the rows due, and a later claim takes them.
func TestRunner_ClaimFailuresAreRetriedAtThePoll(t *testing.T) {
	q := &queue{due: []int{1, 2, 3}, failFor: 3}
	var wg sync.WaitGroup
	wg.Add(3)
	r := New(Config[int]{Name: "test", Workers: 2, Poll: 5 * time.Millisecond, Claim: q.claim, Work: func(context.Context, int) { wg.Done() }})
	r.Start()
	waitOrFail(t, &wg, 30*time.Second, "rows left after claims failed were never worked")
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestRunner_StopWaitsForWorkAndCancelsItAtItsDeadline: Stop lets running
// work finish; when Stop's context ends first, the work's context is
// canceled and Stop still returns only after the work has returned (its
// outcome recorded).
func TestRunner_StopWaitsForWorkAndCancelsItAtItsDeadline(t *testing.T) {
	q := &queue{due: []int{1}}
	started := make(chan struct{})
	var returned atomic.Bool
	r := New(Config[int]{Name: "test", Workers: 1, Poll: time.Hour, Claim: q.claim, Work: func(ctx context.Context, _ int) {
		close(started)
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // records its outcome after the cancel
		returned.Store(true)
	}})
	r.Start()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := r.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want its deadline", err)
	}
	if !returned.Load() {
		t.Fatal("Stop returned before the canceled work returned")
	}
}

// TestRunner_HeldClaimsWakeWhenWorkFrees: a claim held back by something
// other than the workers (a relay's sessions) marks a backlog, and the
// end of a job claims again at once rather than at the poll.
func TestRunner_HeldClaimsWakeWhenWorkFrees(t *testing.T) {
	var mu sync.Mutex
	due := []int{1, 2, 3}
	claim := func(_ context.Context, n int) ([]int, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(due) == 0 {
			return nil, false, nil
		}
		j := due[0]
		due = due[1:]
		return []int{j}, len(due) > 0, nil // one at a time: the rest held
	}
	var wg sync.WaitGroup
	wg.Add(3)
	r := New(Config[int]{Name: "test", Workers: 8, Poll: time.Hour, Claim: claim, Work: func(context.Context, int) { wg.Done() }})
	r.Start()
	waitOrFail(t, &wg, 30*time.Second, "held rows waited for the hour-long poll")
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestRunner_StopBeforeStart returns at once.
func TestRunner_StopBeforeStart(t *testing.T) {
	r := New(Config[int]{Name: "test", Poll: time.Hour, Claim: (&queue{}).claim, Work: func(context.Context, int) {}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func waitOrFail(t *testing.T, wg *sync.WaitGroup, d time.Duration, msg string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatal(msg)
	}
}
