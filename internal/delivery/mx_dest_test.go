package delivery_test

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// twoDestinations is a zone whose two domains have exchangers of their
// own names (two destinations), both served by the recording server.
var twoDestinations = []string{
	"one.test. MX 10 mx.one.test.", "mx.one.test. A 127.0.0.1",
	"two.test. MX 10 mx.two.test.", "mx.two.test. A 127.0.0.1",
	"also-one.test. MX 10 mx.one.test.",
}

// messagesTo counts the messages the exchanger got per envelope recipient.
func messagesTo(srv *smtptest.Server) map[string]int {
	out := map[string]int{}
	for _, m := range srv.Messages() {
		for _, r := range m.To {
			out[r]++
		}
	}
	return out
}

// TestMX_TemporaryFailureRetriesThatDestinationOnly: a 4xx at one
// destination leaves the other delivered at once; the retry goes to the
// deferred destination only, and nobody gets the message twice.
func TestMX_TemporaryFailureRetriesThatDestinationOnly(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		dns := dnstest.Start(t, twoDestinations...)
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, MX: true, RetryBase: 50 * time.Millisecond, DNSResolver: dns.Addr()})
		greylist := &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "greylisted, come back later"}
		env.SMTP.SetBehaviour(smtptest.Behaviour{RcptErrFor: map[string]*smtp.SMTPError{"bob@two.test": greylist}})

		id := send(t, env, map[string]any{"to": []string{"ann@one.test", "bob@two.test"}, "cc": "cy@also-one.test", "subject": "split", "text": "x"})
		s := waitEvent(t, env, id, core.EventDeliveryDelayed, 1)
		if got := messagesTo(env.SMTP); got["ann@one.test"] != 1 || got["cy@also-one.test"] != 1 || got["bob@two.test"] != 0 {
			t.Fatalf("after the deferral the exchangers got %v, want ann@ and cy@ once (one destination, delivered at once), bob@ not yet", got)
		}
		if msgs := env.SMTP.Messages(); len(msgs) != 1 || !slices.Equal(msgs[0].To, []string{"ann@one.test", "cy@also-one.test"}) {
			t.Errorf("domains sharing their exchangers are one transaction: got %+v", msgs)
		}
		rs := recipientStatuses(getSend(t, env, id))
		if rs["ann@one.test"] != "delivered" || rs["bob@two.test"] != "delivery_delayed" {
			t.Errorf("recipients %v, want ann@ delivered and bob@ delivery_delayed", rs)
		}
		if st := str(s, "status"); st == string(core.StatusDelivered) {
			t.Errorf("status %s while bob@ is deferred", st)
		}
		env.SMTP.SetBehaviour(smtptest.Behaviour{})

		s = env.WaitStatus(t, id, waitLong, core.StatusDelivered)
		time.Sleep(settle)
		want := map[string]int{"ann@one.test": 1, "cy@also-one.test": 1, "bob@two.test": 1}
		if got := messagesTo(env.SMTP); !maps.Equal(got, want) {
			t.Errorf("exchangers got %v, want each recipient once", got)
		}
		if rs := recipientStatuses(s); rs["ann@one.test"] != "delivered" || rs["bob@two.test"] != "delivered" || rs["cy@also-one.test"] != "delivered" {
			t.Errorf("recipients %v, want all delivered", rs)
		}
		ev := eventTypes(s)
		if countOf(ev, core.EventSent) != 1 || countOf(ev, core.EventDelivered) != 3 {
			t.Errorf("events %v: want one sent and a delivered per recipient", ev)
		}
	})
}

// TestMX_AmbiguousDestinationIsNotResent: the connection breaks after DATA at
// one destination after another took the message: those recipients are
// unknown and never retried by themselves, the others are delivered, and
// reconcile's resend goes to the unknown ones only.
func TestMX_AmbiguousDestinationIsNotResent(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		dns := dnstest.Start(t, twoDestinations...)
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, MX: true, RetryBase: 50 * time.Millisecond, DNSResolver: dns.Addr()})
		env.SMTP.SetBehaviour(smtptest.Behaviour{HangUpAfterDataFor: map[string]bool{"bob@two.test": true}})

		id := send(t, env, map[string]any{"to": []string{"ann@one.test", "bob@two.test"}, "subject": "split", "text": "x"})
		s := env.WaitStatus(t, id, waitLong, core.StatusUnknown)
		time.Sleep(settle)
		if got := messagesTo(env.SMTP); got["ann@one.test"] != 1 || got["bob@two.test"] != 0 {
			t.Fatalf("exchangers got %v, want ann@ once", got)
		}
		if rs := recipientStatuses(s); rs["ann@one.test"] != "delivered" || rs["bob@two.test"] != "unknown" {
			t.Errorf("recipients %v, want ann@ delivered, bob@ unknown", rs)
		}
		env.SMTP.SetBehaviour(smtptest.Behaviour{})
		r := reconcile(t, env, id, "resend")
		if r.Status != http.StatusOK {
			t.Fatalf("reconcile: %d %s", r.Status, r.Body)
		}
		s = env.WaitStatus(t, id, waitLong, core.StatusDelivered)
		time.Sleep(settle)
		if got := messagesTo(env.SMTP); got["ann@one.test"] != 1 || got["bob@two.test"] != 1 {
			t.Errorf("after resend the exchangers got %v, want ann@ still once and bob@ once", got)
		}
		if rs := recipientStatuses(s); rs["bob@two.test"] != "delivered" {
			t.Errorf("recipients %v after resend", rs)
		}
	})
}

// TestMX_RetriesUntilTheQueueLifetime: under mx a destination that keeps
// deferring is retried past --max-attempts, the waits capped by
// --max-retry-delay, until the queue lifetime; then its recipient fails
// (email.failed) while the other destination's recipient stays delivered.
func TestMX_RetriesUntilTheQueueLifetime(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		dns := dnstest.Start(t, twoDestinations...)
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, MX: true, DNSResolver: dns.Addr(),
			RetryBase: 10 * time.Millisecond, MaxRetryDelay: 40 * time.Millisecond, MaxAttempts: 2, MaxQueueLifetime: time.Hour})
		deferred := &smtp.SMTPError{Code: 450, EnhancedCode: smtp.EnhancedCode{4, 2, 0}, Message: "mailbox busy"}
		env.SMTP.SetBehaviour(smtptest.Behaviour{RcptErrFor: map[string]*smtp.SMTPError{"bob@two.test": deferred}})

		id := send(t, env, map[string]any{"to": []string{"ann@one.test", "bob@two.test"}, "subject": "patience", "text": "x"})
		s := waitEvent(t, env, id, core.EventAttemptStarted, 6) // three times --max-attempts
		if st := str(s, "status"); st != string(core.StatusQueued) && st != string(core.StatusSending) {
			t.Fatalf("after 6 attempts the send is %s, want still queued (the lifetime is an hour)", st)
		}
		env.Clock.Advance(time.Hour) // the test clock: the lifetime is over
		s = env.WaitStatus(t, id, waitLong, core.StatusDelivered)
		rs := recipientStatuses(s)
		if rs["ann@one.test"] != "delivered" || rs["bob@two.test"] != "failed" {
			t.Errorf("recipients %v, want ann@ delivered and bob@ failed", rs)
		}
		failedFor := eventFields(s, core.EventFailed, "detail")
		if len(failedFor) != 1 || !strings.Contains(failedFor[0], "queue lifetime") {
			t.Errorf("failed events %q, want one naming the queue lifetime", failedFor)
		}
		if got := messagesTo(env.SMTP); got["ann@one.test"] != 1 || got["bob@two.test"] != 0 {
			t.Errorf("exchangers got %v", got)
		}
	})
}

// TestMX_RescuedSendLeavesNoRecipientDelayed: a recipient deferred by one
// attempt, whose retry's worker then dies (its lease runs out), is
// unknown with its send — that retry may have handed it over — not left
// delivery_delayed under an unknown send (the soak found one so); and
// reconcile's resend gives it the message, the delivered recipient not
// again.
func TestMX_RescuedSendLeavesNoRecipientDelayed(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		dns := dnstest.Start(t, twoDestinations...)
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, MX: true, NoWorkers: true, Lease: 30 * time.Second,
			DNSResolver: dns.Addr()})
		ctx := context.Background()
		greylist := &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 7, 1}, Message: "greylisted, come back later"}
		env.SMTP.SetBehaviour(smtptest.Behaviour{RcptErrFor: map[string]*smtp.SMTPError{"bob@two.test": greylist}})

		id := send(t, env, map[string]any{"to": []string{"ann@one.test", "bob@two.test"}, "subject": "rescued", "text": "x"})
		if n, err := env.Server.Deliver.RunOnce(ctx); err != nil || n != 1 {
			t.Fatalf("RunOnce = %d, %v; want the first attempt", n, err)
		}
		if rs := recipientStatuses(getSend(t, env, id)); rs["ann@one.test"] != "delivered" || rs["bob@two.test"] != "delivery_delayed" {
			t.Fatalf("after the first attempt: recipients %v, want ann@ delivered, bob@ delivery_delayed", rs)
		}
		env.SMTP.SetBehaviour(smtptest.Behaviour{})
		forceSending(t, env, id, env.Clock.Now().Add(30*time.Second)) // the retry's worker dies
		env.Clock.Advance(31 * time.Second)
		if n, err := env.Server.Deliver.RescueExpired(ctx); err != nil || n != 1 {
			t.Fatalf("RescueExpired = %d, %v; want 1", n, err)
		}
		s := getSend(t, env, id)
		if rs := recipientStatuses(s); str(s, "status") != string(core.StatusUnknown) || rs["ann@one.test"] != "delivered" || rs["bob@two.test"] != "unknown" {
			t.Fatalf("after the rescue: status %s, recipients %v; want unknown, ann@ delivered, bob@ unknown", str(s, "status"), rs)
		}

		if r := reconcile(t, env, id, "resend"); r.Status != http.StatusOK {
			t.Fatalf("reconcile: %d %s", r.Status, r.Body)
		}
		// The destination's shaping may turn the first claim back to the
		// queue (it paces a destination's messages): a few rounds, bounded.
		for i := 0; i < 100 && str(getSend(t, env, id), "status") == string(core.StatusQueued); i++ {
			if _, err := env.Server.Deliver.RunOnce(ctx); err != nil {
				t.Fatalf("RunOnce after resend: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(settle)
		s = getSend(t, env, id)
		if got := messagesTo(env.SMTP); got["ann@one.test"] != 1 || got["bob@two.test"] != 1 || str(s, "status") != string(core.StatusDelivered) {
			t.Errorf("after resend: status %s, the exchangers got %v; want delivered, each recipient once", str(s, "status"), got)
		}
	})
}
