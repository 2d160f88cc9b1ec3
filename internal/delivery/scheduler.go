package delivery

import (
	"log/slog"
	"time"

	"github.com/sendonce/sendonce/internal/leasequeue"
)

// claimBatch bounds how many sends one claim takes: one statement and one
// commit for the lot, while a crash leaves at most that many unknown.
const claimBatch = 100

// Scheduler runs delivery in one process: it claims due sends as workers
// free up and runs an attempt for each, on the one lease-queue runner
// (internal/leasequeue). The send rows are the queue, so a send that is
// queued is always found again — after a crash, a database outage of any
// length, or a failed claim — by the next claim of any process.
type Scheduler struct {
	*leasequeue.Runner[Claimed]
}

// NewScheduler returns a scheduler running at most workers attempts at
// once, looking for due sends every poll and whenever Notify is called.
func NewScheduler(d *Deliverer, workers int, poll time.Duration, logger *slog.Logger) *Scheduler {
	r := leasequeue.New(leasequeue.Config[Claimed]{Name: "due sends", Workers: workers, Batch: claimBatch, Poll: poll,
		Claim: d.Claim, Work: d.Run, Logger: logger})
	d.onSlotFree = func() {
		if r.Backlogged() {
			r.Notify() // a relay session is free and more sends are due
		}
	}
	return &Scheduler{r}
}
