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
// message a second: of three sends, at most one is ever sending.
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
		// Sample the sends sending while the relay works through them. A
		// deferred send is sending for the moment between its claim and its
		// deferral (milliseconds, every half second); one that waits for
		// the session is sending all along.
		samples, crowded := 0, 0
		for deadline := time.Now().Add(waitLong); len(slow.Messages()) < 3 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			samples++
			if env.QueryInt(t, `SELECT count(*) FROM sends WHERE status = 'sending'`) > 1 {
				crowded++
			}
		}
		if samples == 0 || crowded*4 > samples {
			t.Errorf("more than one send was sending in %d of %d samples, behind a relay with one session; want (almost) never", crowded, samples)
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
