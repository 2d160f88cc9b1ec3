// Package leasequeue runs a queue whose rows are claimed under a lease:
// sends, webhook deliveries and IMAP appends are each such a queue, and
// each had its own claim loop. One loop serves them all: it claims as
// many rows as it has free workers (at most Batch at once), runs each in
// a worker of its own, claims again at once while claims come back full,
// and otherwise waits for Notify or the poll. The rows are the queue, so
// a row not claimed (a crash, a failed claim, a database outage) is
// claimed again by the next claim of any process: the runner keeps no
// state a crash could lose.
package leasequeue

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sendonce/sendonce/internal/defaults"
)

// Config is one queue's runner.
type Config[J any] struct {
	// Name names the queue in the log ("sends", "webhook deliveries").
	Name string
	// Workers bounds the rows worked on at once. Defaults to 1.
	Workers int
	// Batch bounds one claim. Defaults to Workers.
	Batch int
	// Poll is how often an idle runner claims. Required.
	Poll time.Duration
	// Claim claims at most n due rows. held says it took fewer than were
	// due because something other than the workers held them back (a
	// relay's sessions): more are due, and a finished job makes room.
	Claim func(ctx context.Context, n int) (jobs []J, held bool, err error)
	// Work works one claimed row, recording its outcome.
	Work func(ctx context.Context, job J)
	// Logger defaults to none.
	Logger *slog.Logger
}

// Runner runs one lease queue in this process.
type Runner[J any] struct {
	cfg  Config[J]
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	// jobs is the context of running work: Stop lets it finish and
	// cancels it only when Stop's own deadline comes.
	jobs    context.Context
	cancel  context.CancelFunc
	running sync.WaitGroup
	slots   chan struct{}
	once    sync.Once
	started atomic.Bool
	// backlog: the last claim took all it asked for, or was held back, so
	// more may be due as soon as a worker frees up.
	backlog atomic.Bool
}

// New returns a runner; Start starts it.
func New[J any](cfg Config[J]) *Runner[J] {
	cfg.Workers = max(cfg.Workers, 1)
	defaults.Set(&cfg.Batch, cfg.Workers)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Runner[J]{cfg: cfg, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		jobs: ctx, cancel: cancel, slots: make(chan struct{}, cfg.Workers)}
}

// Notify makes the runner claim now (a row became due in this process). It
// never blocks.
func (r *Runner[J]) Notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Backlogged says whether the last claim left rows due: a caller that frees
// what held a claim back (a relay session) then calls Notify.
func (r *Runner[J]) Backlogged() bool { return r.backlog.Load() }

// Start runs the claim loop until Stop.
func (r *Runner[J]) Start() {
	r.started.Store(true)
	go r.loop()
}

func (r *Runner[J]) loop() {
	defer close(r.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	failures := 0
	for {
		full := false
		if free := r.cfg.Workers - len(r.slots); free > 0 {
			n := min(free, r.cfg.Batch)
			jobs, held, err := r.cfg.Claim(r.jobs, n)
			if err != nil {
				// The database may be down: nothing was claimed and every
				// due row is still due. Try again at the poll.
				failures++
				if failures == 1 || failures%100 == 0 {
					r.cfg.Logger.Warn("claiming "+r.cfg.Name+" failed; retrying", slog.Int("failures", failures), slog.Any("error", err))
				}
			} else {
				failures = 0
			}
			for _, j := range jobs {
				r.slots <- struct{}{}
				r.running.Add(1)
				go func() {
					defer r.running.Done()
					r.cfg.Work(r.jobs, j)
					<-r.slots
					if r.backlog.Load() {
						r.Notify() // a worker is free and more are due
					}
				}()
			}
			full = len(jobs) == n && !held
			r.backlog.Store(full || held)
		}
		if full {
			select {
			case <-r.stop:
				return
			default:
				continue // more may be due at once
			}
		}
		timer.Reset(r.cfg.Poll)
		select {
		case <-r.stop:
			return
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// Stop stops claiming and waits for the running work to finish and record
// its outcomes; when ctx ends first, the work's context is canceled and
// Stop still waits for the outcomes to be written (a row whose outcome
// was not recorded is claimed again when its lease ends).
func (r *Runner[J]) Stop(ctx context.Context) error {
	r.once.Do(func() { close(r.stop) })
	if r.started.Load() {
		<-r.done
	}
	finished := make(chan struct{})
	go func() {
		r.running.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		r.cancel()
		return nil
	case <-ctx.Done():
		r.cancel()
		<-finished
		return ctx.Err()
	}
}
