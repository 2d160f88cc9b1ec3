package main_test

import (
	"sync"
	"time"
)

// killWindows records when a test was killing a server, so its clients can
// tell a 500 that a kill could explain from one nothing explains. A 500 is a
// bug, not a retryable answer: a deadlock once surfaced exactly as a 500 in
// these multi-process tests, and retrying it hid it.
type killWindows struct {
	mu    sync.Mutex
	spans []killSpan
}

type killSpan struct{ from, to time.Time } // to is zero while the span is open

// begin opens a span: a kill is about to land.
func (k *killWindows) begin() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.spans = append(k.spans, killSpan{from: time.Now()})
}

// end closes the open span grace from now: the replacement listens, and
// requests already in flight get grace to be answered.
func (k *killWindows) end(grace time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if n := len(k.spans); n > 0 && k.spans[n-1].to.IsZero() {
		k.spans[n-1].to = time.Now().Add(grace)
	}
}

// covers reports whether a request sent at sent and answered at answered
// overlaps a kill.
func (k *killWindows) covers(sent, answered time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.spans {
		if !answered.Before(s.from) && (s.to.IsZero() || !sent.After(s.to)) {
			return true
		}
	}
	return false
}
