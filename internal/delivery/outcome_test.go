package delivery

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/transport"
)

// The contract's section 5 as a table: what each transport answer does to
// the send, and whether the attempt counts.
func TestOutcomeOf_Table(t *testing.T) {
	terr := func(c transport.Class, reached bool) error {
		return &transport.Error{Class: c, Reached: reached, Stage: transport.StageRcpt, Err: errors.New("boom")}
	}
	cases := []struct {
		name          string
		err           error
		attempt, max  int
		status        core.Status
		event, metric string
		reached       bool
		retry         bool
	}{
		{"250", nil, 1, 5, core.StatusSent, core.EventSent, "sent", true, false},
		{"250 on the last try", nil, 5, 5, core.StatusSent, core.EventSent, "sent", true, false},
		{"5xx", terr(transport.Permanent, true), 1, 5, core.StatusFailed, core.EventFailed, "permfail", true, false},
		{"blocked before any connect", terr(transport.Permanent, false), 1, 5, core.StatusFailed, core.EventFailed, "permfail", false, false},
		{"lost after DATA", terr(transport.Ambiguous, true), 1, 5, core.StatusUnknown, core.EventUnknown, "unknown", true, false},
		{"lost after DATA on the last try", terr(transport.Ambiguous, true), 5, 5, core.StatusUnknown, core.EventUnknown, "unknown", true, false},
		{"4xx", terr(transport.Temporary, true), 1, 5, core.StatusQueued, core.EventAttemptFailed, "tempfail", true, true},
		{"refused connect", terr(transport.Temporary, false), 2, 5, core.StatusQueued, core.EventAttemptFailed, "tempfail", false, true},
		{"4xx on the last try", terr(transport.Temporary, true), 5, 5, core.StatusFailed, core.EventFailed, "tempfail", true, false},
		{"not a transport error", errors.New("render"), 1, 5, core.StatusQueued, core.EventAttemptFailed, "tempfail", false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := outcomeOf(c.err, c.attempt, c.max)
			if o.status != c.status || o.event != c.event || o.metric != c.metric || o.reached != c.reached || o.retry != c.retry {
				t.Fatalf("outcomeOf = status %s event %s metric %s reached %v retry %v; want %s %s %s %v %v",
					o.status, o.event, o.metric, o.reached, o.retry, c.status, c.event, c.metric, c.reached, c.retry)
			}
			if c.err != nil && o.status != core.StatusFailed && o.detail != c.err.Error() {
				t.Fatalf("detail %q, want the error %q", o.detail, c.err.Error())
			}
		})
	}
}

// What an outcome writes: the claim released every time; the attempt
// counted only when it reached the relay; the next due time for a retry
// (after the backoff) and a deferral (after deferDelay, its try given
// back); sent_at only for a handoff; and the events each adds.
func TestNextSendAndEvents_Table(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	claimedAt := now.Add(-2 * time.Second)
	lease := now.Add(time.Minute)
	claimed := core.Send{ID: "snd_1", Status: core.StatusSending, Attempts: 2, Tries: 3, AttemptToken: "tok",
		LeaseUntil: &lease, UpdatedAt: claimedAt, LastError: "earlier"}
	backoff := 40 * time.Second
	cases := []struct {
		name     string
		o        outcome
		status   core.Status
		attempts int
		tries    int
		due      time.Duration // 0: none set
		sent     bool
		lastErr  string
		events   []string
	}{
		{"sent", with(outcomeOf(nil, 3, 5)), core.StatusSent, 3, 3, 0, true, "", []string{core.EventAttemptStarted, core.EventSent}},
		{"delivered (mx)", func() outcome {
			o := with(outcomeOf(nil, 3, 5))
			o.status, o.delivered = core.StatusDelivered, true
			return o
		}(),
			core.StatusDelivered, 3, 3, 0, true, "", []string{core.EventAttemptStarted, core.EventSent, core.EventDelivered}},
		{"retry", with(outcomeOf(&transport.Error{Class: transport.Temporary, Reached: true, Err: errors.New("451")}, 3, 5)),
			core.StatusQueued, 3, 3, backoff, false, "451", []string{core.EventAttemptStarted, core.EventAttemptFailed, core.EventDeliveryDelayed}},
		{"retry, never reached", with(outcomeOf(&transport.Error{Class: transport.Temporary, Err: errors.New("refused")}, 3, 5)),
			core.StatusQueued, 2, 3, backoff, false, "refused", []string{core.EventAttemptStarted, core.EventAttemptFailed, core.EventDeliveryDelayed}},
		{"unknown", with(outcomeOf(&transport.Error{Class: transport.Ambiguous, Reached: true, Err: errors.New("EOF")}, 3, 5)),
			core.StatusUnknown, 3, 3, 0, false, "EOF", []string{core.EventAttemptStarted, core.EventUnknown}},
		{"deferred: no session", outcome{status: core.StatusQueued, deferred: true, detail: "busy"},
			core.StatusQueued, 2, 2, deferDelay, false, "earlier", nil},
		{"suppressed: nothing attempted", outcome{status: core.StatusSuppressed, detail: "all suppressed"},
			core.StatusSuppressed, 2, 3, 0, false, "all suppressed", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := claimed
			next := nextSend(&s, c.o, now, backoff)
			if next.AttemptToken != "" || next.LeaseUntil != nil || !next.UpdatedAt.Equal(now) {
				t.Fatalf("claim not released: token %q lease %v updated %v", next.AttemptToken, next.LeaseUntil, next.UpdatedAt)
			}
			if next.Status != c.status || next.Attempts != c.attempts || next.Tries != c.tries || !lastErrorIs(next.LastError, c.lastErr) {
				t.Fatalf("status %s attempts %d tries %d last error %q; want %s %d %d %q",
					next.Status, next.Attempts, next.Tries, next.LastError, c.status, c.attempts, c.tries, c.lastErr)
			}
			switch {
			case c.due == 0 && next.NextAttemptAt != nil && !next.NextAttemptAt.Equal(ptrTime(s.NextAttemptAt)):
				t.Fatalf("next attempt set to %v, want unchanged", next.NextAttemptAt)
			case c.due != 0 && (next.NextAttemptAt == nil || !next.NextAttemptAt.Equal(now.Add(c.due))):
				t.Fatalf("next attempt %v, want %v", next.NextAttemptAt, now.Add(c.due))
			}
			if (next.SentAt != nil) != c.sent {
				t.Fatalf("sent_at %v, want set=%v", next.SentAt, c.sent)
			}
			var types []string
			for _, e := range attemptEvents(&s, c.o, &next, now) {
				types = append(types, e.Type)
				if e.Type == core.EventAttemptStarted && !e.At.Equal(claimedAt) {
					t.Fatalf("attempt_started at %v, want the claim's time %v", e.At, claimedAt)
				}
			}
			if !slices.Equal(types, c.events) {
				t.Fatalf("events %v, want %v", types, c.events)
			}
		})
	}
}

// lastErrorIs: the error ends with want (the transport's own words
// before it), and is empty when want is.
func lastErrorIs(got, want string) bool {
	return strings.HasSuffix(got, want) && (want != "" || got == "")
}

// with marks an outcome as a handoff that was tried, as Run does.
func with(o outcome) outcome { o.attempted = true; return o }

func ptrTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
