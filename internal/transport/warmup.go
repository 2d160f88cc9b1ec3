package transport

import (
	"sync"
	"time"
)

// WarmupSchedule is the most messages a warming-up source sends to one
// destination (a shaping site: a provider's roll-up such as gmail, or one
// set of mail exchangers) on each day of its warm-up, day 1 first; from
// the day after the last, the source is warm and has no cap. It follows
// the shape of the schedules mailbox providers and sending services
// publish for a new address: a few dozen messages the first day, about
// doubling each day for the first days, then slower steps, warm after
// about a month.
var WarmupSchedule = []int{
	50, 100, 200, 400, 750, 1000, 1500, 2000, 3000, 4000, // days 1-10
	5000, 7500, 10000, 15000, 20000, 25000, 30000, 40000, 50000, 60000, // days 11-20
	75000, 100000, 125000, 150000, 175000, 200000, 250000, 300000, 400000, 500000, // days 21-30
}

// WarmupCap is the cap of a source on day (1 for its first day) of its
// warm-up under schedule; -1 when it has none (warm). A start date in the
// future is an operator's mistake, and capping at day 1 is the safe
// reading of it, so day < 1 counts as day 1.
func WarmupCap(schedule []int, day int) int {
	if day > len(schedule) {
		return -1
	}
	return schedule[max(day, 1)-1]
}

// warmup counts, in this process, the messages each warming-up source
// began today per destination site. The day is UTC's.
type warmup struct {
	start    map[string]time.Time // source name → its first day
	schedule []int
	now      func() time.Time
	mu       sync.Mutex
	day      time.Time         // the day counted
	sent     map[[2]string]int // (source, site) → messages today
}

func newWarmup(start map[string]time.Time, schedule []int, now func() time.Time) *warmup {
	if now == nil {
		now = time.Now
	}
	if schedule == nil {
		schedule = WarmupSchedule
	}
	return &warmup{start: start, schedule: schedule, now: now, sent: map[[2]string]int{}}
}

// take counts one message from source to site today and reports whether
// the source's warm-up allowed it. It is counted when the source is chosen
// for the message, so a connection that then fails counts too: the cap
// errs on the side of sending less.
func (w *warmup) take(source, site string) bool {
	start, ok := w.start[source]
	if !ok {
		return true
	}
	today := w.now().UTC().Truncate(24 * time.Hour)
	limit := WarmupCap(w.schedule, int(today.Sub(start.UTC().Truncate(24*time.Hour))/(24*time.Hour))+1)
	if limit < 0 {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !today.Equal(w.day) {
		// A new day: yesterday's counts are done with, which also keeps
		// the map as small as one day's destinations.
		w.day, w.sent = today, map[[2]string]int{}
	}
	k := [2]string{source, site}
	if w.sent[k] >= limit {
		return false
	}
	w.sent[k]++
	return true
}

// nextDay is when today's caps end.
func (w *warmup) nextDay() time.Time {
	return w.now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
}
