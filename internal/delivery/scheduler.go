package delivery

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// claimBatch bounds how many sends one claim takes: one statement and one
// commit for the lot, while a crash leaves at most that many unknown.
const claimBatch = 100

// Scheduler runs delivery in one process: it claims due sends as workers
// free up and runs an attempt for each. The send rows are the queue, so a
// send that is queued is always found again — after a crash, a database
// outage of any length, or a failed claim — by the next claim of any
// process.
type Scheduler struct {
	d       *Deliverer
	workers int
	poll    time.Duration
	logger  *slog.Logger

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	// attempts is the context of running attempts: Stop lets them finish
	// and cancels it only when its own deadline comes.
	attempts context.Context
	cancel   context.CancelFunc
	running  sync.WaitGroup
	slots    chan struct{}
	once     sync.Once
	// backlog: the last claim took all it asked for, so more may be due
	// as soon as a slot frees up.
	backlog atomic.Bool
}

// NewScheduler returns a scheduler running at most workers attempts at
// once, looking for due sends every poll and whenever Notify is called.
func NewScheduler(d *Deliverer, workers int, poll time.Duration, logger *slog.Logger) *Scheduler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Scheduler{
		d: d, workers: workers, poll: poll, logger: logger,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		attempts: ctx, cancel: cancel, slots: make(chan struct{}, workers),
	}
	d.onSlotFree = func() {
		if s.backlog.Load() {
			s.Notify() // a relay session is free and more sends are due
		}
	}
	return s
}

// Notify makes the scheduler look for due sends now (a send was accepted
// or became due in this process). It never blocks.
func (s *Scheduler) Notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start runs the claim loop until Stop.
func (s *Scheduler) Start() { go s.loop() }

func (s *Scheduler) loop() {
	defer close(s.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	failures := 0
	for {
		full := false
		if free := s.workers - len(s.slots); free > 0 {
			n := min(free, claimBatch)
			claimed, short, err := s.d.Claim(s.attempts, n)
			if err != nil {
				// The database may be down: nothing was claimed, every due
				// send is still queued. Try again later, less often.
				failures++
				if failures == 1 || failures%100 == 0 {
					s.logger.Warn("claiming due sends failed; retrying", slog.Int("failures", failures), slog.Any("error", err))
				}
			} else {
				failures = 0
			}
			for _, c := range claimed {
				s.slots <- struct{}{}
				s.running.Add(1)
				go func() {
					defer s.running.Done()
					s.d.Run(s.attempts, c)
					<-s.slots
					if s.backlog.Load() {
						s.Notify() // a slot is free and more are due
					}
				}()
			}
			full = len(claimed) == n && !short
			// Held back by the relay's sessions: more may be due, and the
			// attempt that frees a session wakes the loop (backlog).
			s.backlog.Store(full || short)
		}
		if full {
			select {
			case <-s.stop:
				return
			default:
				continue // more may be due at once
			}
		}
		timer.Reset(s.poll)
		select {
		case <-s.stop:
			return
		case <-s.wake:
		case <-timer.C:
		}
	}
}

// Stop stops claiming and waits for the running attempts to finish and
// record their outcomes; when ctx ends first, their transports are
// canceled (an attempt past DATA then ends unknown) and Stop waits for the
// outcomes to be written.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.once.Do(func() { close(s.stop) })
	<-s.done
	finished := make(chan struct{})
	go func() {
		s.running.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		s.cancel()
		return nil
	case <-ctx.Done():
		s.cancel()
		<-finished
		return ctx.Err()
	}
}
