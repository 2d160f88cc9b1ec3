package delivery_test

import (
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// A send whose relay has no free session is not held in sending while it
// waits (a crash would then make it unknown although nothing left): it
// goes back to the queue before any attempt and goes out once a session
// is free. Here a mailbox's relay allows one session and holds each
// message a second: of three sends, one is sending at a time, but for
// the moments between a claim and its deferral.
func TestDeliver_BusyMailboxRelayDefersInsteadOfHoldingSending(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		slow := smtptest.Start(t, smtptest.Options{}) // first: its cleanup checks the sessions env closed
		slow.SetBehaviour(smtptest.Behaviour{DelayData: time.Second})
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase})
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: rand.Text(),
			Body: map[string]any{"id": "slow", "address": "slow@example.com", "transport": "smtp://" + slow.Addr + "?tls=none&max_sessions=1"}})
		if r.Status != http.StatusCreated {
			t.Fatalf("create mailbox: %d %s", r.Status, r.Body)
		}
		var ids []string
		for range 3 {
			ids = append(ids, send(t, env, map[string]any{"mailbox_id": "slow", "to": "ann@example.com", "subject": "one session", "text": "x"}))
		}
		longest, samples := longestCrowdedStretch(t, env, slow, ids)
		// The fault is a send held sending while it waits for the session:
		// it is sending beside the one on the relay for as long as the relay
		// holds a message (DelayData, a second). Two sends sending at once
		// for a moment cannot be ruled out, and is no fault: (1) a claim
		// takes session slots of the default transport only (a mailbox's
		// relay is known once the send is read), so a send whose mailbox
		// relay is busy is claimed, committed sending, and deferred by the
		// same attempt: it is sending from its claim's commit to its
		// deferral's, once every deferDelay; (2) a relay's session is given
		// back once its message is in, before that send's outcome is
		// written, so the next send can take it while the last is still
		// sending. Each lasts as long as a write (up to ~120 ms seen under
		// -race on a loaded 2-core machine; a send waiting for the session
		// shows 1–2 s). Hence the bound: no send sending beside another for
		// half of DelayData without a break.
		t.Logf("longest stretch of a send sending beside another: %v, in %d samples", longest, samples)
		if samples < 10 {
			t.Fatalf("only %d samples while the relay worked; the sampler did not run", samples)
		}
		if longest >= time.Second/2 {
			t.Errorf("a send was sending beside another for %v without a break (in %d samples), behind a relay with one session that holds each message 1s; want only moments", longest, samples)
		}
		for _, id := range ids {
			s := env.WaitStatus(t, id, waitLong, core.StatusSent)
			if got := attempts(t, s); got != 1 {
				t.Errorf("%s: attempts = %d, want 1 (waiting for a session is no attempt)", id, got)
			}
			if ev := eventTypes(s); countOf(ev, "attempt_started") != 1 || countOf(ev, "attempt_failed") != 0 {
				t.Errorf("%s: events %v, want one attempt and no failure", id, ev)
			}
		}
		for id, n := range slow.MessageIDCounts() {
			if n != 1 {
				t.Errorf("%s arrived %d times", id, n)
			}
		}
	})
}

// longestCrowdedStretch samples, every 10 ms until slow has the sends'
// messages, which of ids are sending, and returns the longest unbroken
// stretch over which one of them was seen sending beside another, and
// the number of samples. A stretch is broken by a sample that does not
// see it so, or by a gap between samples of over 200 ms (a stall of the
// machine, not evidence either way).
func longestCrowdedStretch(t *testing.T, env *sendoncetest.Env, slow *smtptest.Server, ids []string) (longest time.Duration, samples int) {
	t.Helper()
	const maxGap = 200 * time.Millisecond
	start := make([]time.Time, len(ids)) // zero: not in a stretch
	var last time.Time
	for deadline := time.Now().Add(waitLong); len(slow.Messages()) < len(ids) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mask := env.QueryInt(t, `SELECT coalesce(sum(CASE id WHEN ? THEN 1 WHEN ? THEN 2 WHEN ? THEN 4 ELSE 0 END), 0)
			FROM sends WHERE status = 'sending'`, ids[0], ids[1], ids[2])
		now := time.Now()
		samples++
		crowded := mask&(mask-1) != 0 // two bits or more
		for i := range ids {
			switch {
			case !crowded || mask&(1<<i) == 0 || now.Sub(last) > maxGap:
				start[i] = time.Time{}
				if crowded && mask&(1<<i) != 0 {
					start[i] = now
				}
			case start[i].IsZero():
				start[i] = now
			default:
				longest = max(longest, now.Sub(start[i]))
			}
		}
		last = now
	}
	return longest, samples
}
