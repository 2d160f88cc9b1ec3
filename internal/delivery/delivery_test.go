package delivery_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/mail"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/delivery"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// Timing. Every wait below is bounded by one of these.
const (
	retryBase = 10 * time.Millisecond
	// settle is how long a test watches for something that must NOT happen
	// (a retry, a delivery): many retry-base periods and poll intervals.
	settle = 400 * time.Millisecond
	// waitLong bounds waits for something that must happen. Generous for
	// -race on two busy cores; a passing test never waits this long.
	waitLong = 20 * time.Second
)

var (
	reply451 = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
	reply550 = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
)

// send posts body with a fresh Idempotency-Key and returns the send's id.
func send(t *testing.T, env *sendoncetest.Env, body any) string {
	t.Helper()
	r := env.Send(t, rand.Text(), body)
	if r.Status != http.StatusOK {
		t.Fatalf("POST /v1/send: %d %s", r.Status, r.Body)
	}
	id, _ := r.JSON(t)["id"].(string)
	if id == "" {
		t.Fatalf("POST /v1/send: no id in %s", r.Body)
	}
	return id
}

// getSend returns GET /v1/sends/{id}, events included.
func getSend(t *testing.T, env *sendoncetest.Env, id string) map[string]any {
	t.Helper()
	r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/sends/" + id, Key: env.AdminKey})
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/sends/%s: %d %s", id, r.Status, r.Body)
	}
	return r.JSON(t)
}

func eventTypes(s map[string]any) []string {
	evs, _ := s["events"].([]any)
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		m, _ := e.(map[string]any)
		typ, _ := m["type"].(string)
		out = append(out, typ)
	}
	return out
}

// eventFields lists one field (a string: "detail", "recipient") of each
// of a send's events of type typ, in order.
func eventFields(s map[string]any, typ, field string) []string {
	var out []string
	evs, _ := s["events"].([]any)
	for _, e := range evs {
		m, _ := e.(map[string]any)
		if m["type"] == typ {
			v, _ := m[field].(string)
			out = append(out, v)
		}
	}
	return out
}

func countOf(list []string, v string) int {
	n := 0
	for _, s := range list {
		if s == v {
			n++
		}
	}
	return n
}

// waitEvent polls the send until it has at least n events of type typ.
func waitEvent(t *testing.T, env *sendoncetest.Env, id, typ string, n int) map[string]any {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	var s map[string]any
	for time.Now().Before(deadline) {
		s = getSend(t, env, id)
		if countOf(eventTypes(s), typ) >= n {
			return s
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("send %s: fewer than %d %q events after %v: %v", id, n, typ, waitLong, eventTypes(s))
	return nil
}

func attempts(t *testing.T, s map[string]any) int {
	t.Helper()
	n, ok := s["attempts"].(float64)
	if !ok {
		t.Fatalf("attempts is %T %v, want a number", s["attempts"], s["attempts"])
	}
	return int(n)
}

func str(s map[string]any, k string) string {
	v, _ := s[k].(string)
	return v
}

// bareID is a Message-ID without its angle brackets, as smtptest records it.
func bareID(messageID string) string {
	return strings.TrimSuffix(strings.TrimPrefix(messageID, "<"), ">")
}

func reconcile(t *testing.T, env *sendoncetest.Env, id, outcome string) *sendoncetest.Response {
	t.Helper()
	return env.Do(t, sendoncetest.Request{
		Method: "POST", Path: "/v1/sends/" + id + "/reconcile", Key: env.AdminKey, IdemKey: rand.Text(),
		Body: map[string]string{"outcome": outcome},
	})
}

func TestDeliver_250IsSentOnceWithEnvelopeAndHeaders(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase})
		const subject = "Grüße aus Köln — ünïcødé ✓ 日本語"
		id := send(t, env, map[string]any{
			"to":      []string{"Ann Example <ann@example.com>", "bob@example.com"},
			"cc":      "carol@example.com",
			"bcc":     []string{"dave@example.net"},
			"subject": subject,
			"text":    "Hello.",
		})
		s := env.WaitStatus(t, id, waitLong, core.StatusSent)
		if got := attempts(t, s); got != 1 {
			t.Errorf("attempts = %d, want 1", got)
		}
		if s["sent_at"] == nil {
			t.Errorf("sent_at is null on a sent send")
		}
		if s["last_error"] != nil {
			t.Errorf("last_error = %v, want null", s["last_error"])
		}
		if ev := eventTypes(s); !slices.Contains(ev, "sent") {
			t.Errorf("events %v lack sent", ev)
		}

		time.Sleep(settle) // nothing further may arrive
		msgs := env.SMTP.Messages()
		if len(msgs) != 1 {
			t.Fatalf("SMTP server got %d messages, want exactly 1", len(msgs))
		}
		m := msgs[0]
		if want := []string{"ann@example.com", "bob@example.com", "carol@example.com", "dave@example.net"}; !slices.Equal(m.To, want) {
			t.Errorf("envelope recipients = %q, want to+cc+bcc %q", m.To, want)
		}
		if m.From != "sender@example.com" {
			t.Errorf("envelope sender = %q, want sender@example.com", m.From)
		}
		messageID := str(s, "message_id")
		if m.MessageID == "" || m.MessageID != bareID(messageID) {
			t.Errorf("delivered Message-ID %q, send's message_id %q", m.MessageID, messageID)
		}

		parsed, err := mail.ReadMessage(bytes.NewReader(m.Data))
		if err != nil {
			t.Fatalf("delivered data does not parse: %v\n%s", err, m.Data)
		}
		if _, ok := parsed.Header["Bcc"]; ok {
			t.Errorf("delivered message has a Bcc header:\n%s", m.Data)
		}
		if bytes.Contains(m.Data, []byte("dave@example.net")) {
			t.Errorf("the Bcc address appears in the delivered data:\n%s", m.Data)
		}
		if got := parsed.Header.Get("Message-Id"); got != messageID {
			t.Errorf("Message-ID header = %q, want %q", got, messageID)
		}
		got, err := new(mime.WordDecoder).DecodeHeader(parsed.Header.Get("Subject"))
		if err != nil || got != subject {
			t.Errorf("decoded Subject = %q (%v), want %q", got, err, subject)
		}
		for _, h := range []string{"To", "Cc"} {
			if _, err := parsed.Header.AddressList(h); err != nil {
				t.Errorf("%s header does not parse: %v", h, err)
			}
		}
		if cc := parsed.Header.Get("Cc"); !strings.Contains(cc, "carol@example.com") {
			t.Errorf("Cc header = %q", cc)
		}
	})
}

func TestDeliver_TemporaryFailureIsRetriedUntilSent(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		for _, c := range []struct {
			name    string
			relay   smtptest.Behaviour
			lastErr string // last_error after the first failure mentions it
		}{
			{"451 on DATA", smtptest.Behaviour{DataErr: reply451}, "451"},
			{"451 on MAIL", smtptest.Behaviour{MailErr: reply451}, "451"},
			{"451 on RCPT", smtptest.Behaviour{RcptErr: reply451}, "451"},
			{"connection lost before DATA", smtptest.Behaviour{HangUpBeforeData: true}, "mail"},
		} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase, MaxAttempts: 20})
				env.SMTP.SetBehaviour(c.relay)
				id := send(t, env, sendoncetest.Mail("ann@example.com", "retry me"))

				s := waitEvent(t, env, id, "attempt_failed", 1)
				if st := str(s, "status"); st != string(core.StatusQueued) && st != string(core.StatusSending) {
					t.Fatalf("after the first failure the send is %q, want queued (or sending its retry)", st)
				}
				if le := str(s, "last_error"); !strings.Contains(le, c.lastErr) {
					t.Errorf("last_error = %q, want it to mention %q; send %v", le, c.lastErr, s)
				}
				env.SMTP.SetBehaviour(smtptest.Behaviour{})

				s = env.WaitStatus(t, id, waitLong, core.StatusSent)
				ev := eventTypes(s)
				failed, started := countOf(ev, "attempt_failed"), countOf(ev, "attempt_started")
				if failed < 1 || started != failed+1 {
					t.Errorf("events %v: want n attempt_failed then one successful attempt", ev)
				}
				// Each retry scheduled is told as email.delivery_delayed.
				if delayed := countOf(ev, "delivery_delayed"); delayed != failed {
					t.Errorf("events %v: %d delivery_delayed for %d retries scheduled", ev, delayed, failed)
				}
				// Every attempt got the greeting, so every one counts.
				if got := attempts(t, s); got != started {
					t.Errorf("attempts = %d, want %d (every attempt reached the relay)", got, started)
				}
				if i, j := slices.Index(ev, "attempt_failed"), slices.Index(ev, "sent"); i < 0 || j < i {
					t.Errorf("events %v: want attempt_failed before sent", ev)
				}
				if s["last_error"] != nil {
					t.Errorf("last_error = %v after success, want null", s["last_error"])
				}
				time.Sleep(settle)
				if n := len(env.SMTP.Messages()); n != 1 {
					t.Errorf("SMTP server got %d messages, want exactly 1", n)
				}
				if c := env.SMTP.Connections(); c != started {
					t.Errorf("SMTP connections = %d, want one per attempt (%d)", c, started)
				}
			})
		}
	})
}

func TestDeliver_PermanentFailureIsNotRetried(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		for _, c := range []struct {
			name  string
			relay smtptest.Behaviour
		}{
			{"550 on DATA", smtptest.Behaviour{DataErr: reply550}},
			{"550 on RCPT", smtptest.Behaviour{RcptErr: reply550}},
			{"550 on MAIL", smtptest.Behaviour{MailErr: reply550}},
		} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase})
				env.SMTP.SetBehaviour(c.relay)
				id := send(t, env, sendoncetest.Mail("nobody@example.com", "bounce"))

				s := env.WaitStatus(t, id, waitLong, core.StatusFailed)
				if le := str(s, "last_error"); !strings.Contains(le, "550") {
					t.Errorf("last_error = %q, want it to mention 550", le)
				}
				time.Sleep(settle)
				s = getSend(t, env, id)
				if st := str(s, "status"); st != string(core.StatusFailed) {
					t.Errorf("status changed to %q after failing", st)
				}
				if got := attempts(t, s); got != 1 {
					t.Errorf("attempts = %d, want 1", got)
				}
				if c := env.SMTP.Connections(); c != 1 {
					t.Errorf("SMTP connections = %d, want 1 (a 5xx is not retried)", c)
				}
				if ev := eventTypes(s); countOf(ev, "attempt_started") != 1 || countOf(ev, "attempt_failed") != 0 {
					t.Errorf("events %v: want one attempt, no retry", ev)
				}
				if n := len(env.SMTP.Messages()); n != 0 {
					t.Errorf("SMTP server recorded %d messages", n)
				}
			})
		}
	})
}

func TestDeliver_HangUpAfterDataIsUnknownUntilReconciled(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase})
		env.SMTP.SetBehaviour(smtptest.Behaviour{HangUpAfterData: true})
		resend := send(t, env, sendoncetest.Mail("ann@example.com", "resend me"))
		markSent := send(t, env, sendoncetest.Mail("bob@example.com", "it arrived"))
		markFailed := send(t, env, sendoncetest.Mail("carol@example.com", "it did not"))
		ids := []string{resend, markSent, markFailed}
		for _, id := range ids {
			s := env.WaitStatus(t, id, waitLong, core.StatusUnknown)
			if got := attempts(t, s); got != 1 {
				t.Errorf("%s: attempts = %d, want 1", id, got)
			}
			if !slices.Contains(eventTypes(s), "unknown") {
				t.Errorf("%s: events %v lack unknown", id, eventTypes(s))
			}
		}

		// Not retried by itself: many retry periods later, nothing has moved.
		time.Sleep(settle)
		if c := env.SMTP.Connections(); c != len(ids) {
			t.Fatalf("SMTP connections = %d, want %d: an unknown send was retried on its own", c, len(ids))
		}
		for _, id := range ids {
			if st := str(getSend(t, env, id), "status"); st != string(core.StatusUnknown) {
				t.Fatalf("%s: status %q, want it to stay unknown", id, st)
			}
		}
		env.SMTP.SetBehaviour(smtptest.Behaviour{})

		t.Run("resend delivers once more with the same Message-ID", func(t *testing.T) {
			before := getSend(t, env, resend)
			r := reconcile(t, env, resend, "resend")
			if r.Status != http.StatusOK {
				t.Fatalf("reconcile resend: %d %s", r.Status, r.Body)
			}
			if st := str(r.JSON(t), "status"); st != string(core.StatusQueued) {
				t.Errorf("reconcile resend answered status %q, want queued", st)
			}
			s := env.WaitStatus(t, resend, waitLong, core.StatusSent)
			if got := attempts(t, s); got != 2 {
				t.Errorf("attempts = %d, want 2", got)
			}
			time.Sleep(settle)
			msgs := env.SMTP.Messages()
			if len(msgs) != 1 {
				t.Fatalf("SMTP server got %d messages after resend, want 1", len(msgs))
			}
			if want := bareID(str(before, "message_id")); msgs[0].MessageID != want {
				t.Errorf("resent Message-ID %q, want the original %q", msgs[0].MessageID, want)
			}
			if c := env.SMTP.Connections(); c != len(ids)+1 {
				t.Errorf("SMTP connections = %d, want %d (one more attempt)", c, len(ids)+1)
			}
		})

		t.Run("sent and failed set the status without delivering", func(t *testing.T) {
			for _, c := range []struct {
				id, outcome string
				want        core.Status
			}{{markSent, "sent", core.StatusSent}, {markFailed, "failed", core.StatusFailed}} {
				r := reconcile(t, env, c.id, c.outcome)
				if r.Status != http.StatusOK {
					t.Fatalf("reconcile %s: %d %s", c.outcome, r.Status, r.Body)
				}
				s := getSend(t, env, c.id)
				if st := str(s, "status"); st != string(c.want) {
					t.Errorf("reconcile %s: status %q, want %q", c.outcome, st, c.want)
				}
				// A reconciled outcome is that outcome's event (and webhook).
				if !slices.Contains(eventTypes(s), c.outcome) {
					t.Errorf("reconcile %s: events %v lack %s", c.outcome, eventTypes(s), c.outcome)
				}
				if c.want == core.StatusSent && s["sent_at"] == nil {
					t.Errorf("reconciled as sent but sent_at is null")
				}
			}
			time.Sleep(settle)
			if c := env.SMTP.Connections(); c != len(ids)+1 {
				t.Errorf("SMTP connections = %d: reconcile sent/failed made an attempt", c)
			}
		})

		t.Run("from any other status is 409 and changes nothing", func(t *testing.T) {
			for _, id := range ids { // now sent, sent and failed
				for _, outcome := range []string{"resend", "sent", "failed"} {
					before := getSend(t, env, id)
					r := reconcile(t, env, id, outcome)
					if r.Status != http.StatusConflict || r.ErrorCode() != core.CodeInvalidState {
						t.Errorf("reconcile %s of a %s send: %d %s, want 409 invalid_state", outcome, before["status"], r.Status, r.Body)
					}
					after := getSend(t, env, id)
					for _, k := range []string{"status", "attempts", "updated_at", "sent_at", "last_error"} {
						if fmt.Sprint(before[k]) != fmt.Sprint(after[k]) {
							t.Errorf("refused reconcile changed %s: %v -> %v", k, before[k], after[k])
						}
					}
					if len(eventTypes(before)) != len(eventTypes(after)) {
						t.Errorf("refused reconcile added events: %v -> %v", eventTypes(before), eventTypes(after))
					}
				}
			}
			time.Sleep(settle)
			if c := env.SMTP.Connections(); c != len(ids)+1 {
				t.Errorf("SMTP connections = %d: a refused reconcile made an attempt", c)
			}
		})

		t.Run("an unknown outcome is 422", func(t *testing.T) {
			r := reconcile(t, env, resend, "maybe")
			if r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != core.CodeValidation {
				t.Errorf("reconcile maybe: %d %s, want 422 validation_error", r.Status, r.Body)
			}
		})
	})
}

func TestDeliver_AttemptOutlivingItsLeaseIsUnknown(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		// The relay takes the message but answers long after the attempt's
		// lease: the worker gives up mid-DATA, and the relay keeps the message.
		// Retrying would deliver it twice.
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase, Lease: 500 * time.Millisecond})
		env.SMTP.SetBehaviour(smtptest.Behaviour{DelayData: 1500 * time.Millisecond})
		id := send(t, env, sendoncetest.Mail("ann@example.com", "slow relay"))

		s := env.WaitStatus(t, id, waitLong, core.StatusUnknown)
		if got := attempts(t, s); got != 1 {
			t.Errorf("attempts = %d, want 1", got)
		}
		// Past the relay's delay (it records the message then) and many retry
		// periods: still unknown, still one connection.
		deadline := time.Now().Add(waitLong)
		for len(env.SMTP.Messages()) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(settle)
		if st := str(getSend(t, env, id), "status"); st != string(core.StatusUnknown) {
			t.Errorf("status %q, want unknown", st)
		}
		if c, n := env.SMTP.Connections(), len(env.SMTP.Messages()); c != 1 || n != 1 {
			t.Errorf("SMTP connections = %d, messages = %d; want 1 and 1 (the relay kept it; no retry)", c, n)
		}
	})
}

func TestDeliver_GivesUpAfterMaxAttempts(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase, MaxAttempts: 3})
		env.SMTP.SetBehaviour(smtptest.Behaviour{DataErr: reply451})
		id := send(t, env, sendoncetest.Mail("ann@example.com", "never accepted"))

		s := env.WaitStatus(t, id, waitLong, core.StatusFailed)
		if got := attempts(t, s); got != 3 {
			t.Errorf("attempts = %d, want 3", got)
		}
		if le := str(s, "last_error"); !strings.Contains(le, "gave up after 3 attempts") {
			t.Errorf("last_error = %q, want it to say it gave up after 3 attempts", le)
		}
		time.Sleep(settle)
		if c := env.SMTP.Connections(); c != 3 {
			t.Errorf("SMTP connections = %d, want exactly 3", c)
		}
		s = getSend(t, env, id)
		if ev := eventTypes(s); countOf(ev, "attempt_started") != 3 || countOf(ev, "attempt_failed") != 2 || ev[len(ev)-1] != "failed" {
			t.Errorf("events %v: want 3 attempts, 2 retries, then failed", ev)
		}
	})
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}

func TestDeliver_ConnectionRefusedIsRetriedWithoutCountingAttempts(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, RetryBase: retryBase, MaxAttempts: 3})
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: rand.Text(),
			Body: map[string]any{"id": "dead", "address": "dead@example.com", "transport": "smtp://127.0.0.1:" + closedPort(t) + "?tls=none"}})
		if r.Status != http.StatusCreated {
			t.Fatalf("create mailbox: %d %s", r.Status, r.Body)
		}
		id := send(t, env, map[string]any{"mailbox_id": "dead", "to": "ann@example.com", "subject": "refused", "text": "x"})

		s := waitEvent(t, env, id, "attempt_failed", 1)
		if got := attempts(t, s); got != 0 {
			t.Errorf("after a refused connection attempts = %d, want 0", got)
		}
		// It keeps being retried until MaxAttempts (each refused try but
		// the last is an attempt_failed, a retry), and never counts an
		// attempt. The history says so, whatever the machine's speed.
		s = env.WaitStatus(t, id, waitLong, core.StatusFailed)
		if ev := eventTypes(s); countOf(ev, "attempt_started") != 3 || countOf(ev, "attempt_failed") != 2 || countOf(ev, "unknown") != 0 {
			t.Errorf("events %v: want 3 tries, the first two retried, none unknown", ev)
		}
		if got := attempts(t, s); got != 0 {
			t.Errorf("attempts = %d, want 0: the relay was never reached", got)
		}
		if le := str(s, "last_error"); !strings.Contains(le, "gave up") || !strings.Contains(le, "dial") {
			t.Errorf("last_error = %q, want a give-up after dial failures", le)
		}
	})
}

// forceSending puts the send into status sending, as an attempt that began
// and never finished leaves it, with the lease ending at leaseUntil.
func forceSending(t *testing.T, env *sendoncetest.Env, id string, leaseUntil time.Time) {
	t.Helper()
	ctx := context.Background()
	err := env.Server.Store.InTx(ctx, func(tx core.Tx) error {
		s, err := tx.SendForUpdate(ctx, id)
		if err != nil {
			return err
		}
		s.Status, s.AttemptToken, s.LeaseUntil = core.StatusSending, "dead-worker-token", &leaseUntil
		return tx.UpdateSend(ctx, s)
	})
	if err != nil {
		t.Fatalf("force sending: %v", err)
	}
}

func TestDeliver_WorkerDiedMidAttemptBecomesUnknown(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, NoWorkers: true, Lease: 30 * time.Second})
		ctx := context.Background()

		t.Run("rescuer after the lease", func(t *testing.T) {
			id := send(t, env, sendoncetest.Mail("ann@example.com", "dies mid-attempt"))
			forceSending(t, env, id, env.Clock.Now().Add(30*time.Second))

			n, err := env.Server.Deliver.RescueExpired(ctx)
			if err != nil || n != 0 {
				t.Fatalf("RescueExpired within the lease = %d, %v; want 0, nil", n, err)
			}
			if st := str(getSend(t, env, id), "status"); st != string(core.StatusSending) {
				t.Fatalf("status %q within the lease, want sending", st)
			}

			env.Clock.Advance(31 * time.Second)
			n, err = env.Server.Deliver.RescueExpired(ctx)
			if err != nil || n != 1 {
				t.Fatalf("RescueExpired after the lease = %d, %v; want 1, nil", n, err)
			}
			s := getSend(t, env, id)
			if st := str(s, "status"); st != string(core.StatusUnknown) {
				t.Errorf("status %q, want unknown", st)
			}
			if ev := eventTypes(s); ev[len(ev)-1] != "unknown" {
				t.Errorf("events %v, want a final unknown event", ev)
			}
			if str(s, "last_error") == "" {
				t.Errorf("last_error is empty; want the reason it is unknown")
			}
			// A second pass finds nothing more to do.
			if n, err := env.Server.Deliver.RescueExpired(ctx); err != nil || n != 0 {
				t.Errorf("second RescueExpired = %d, %v; want 0, nil", n, err)
			}
		})

		t.Run("a claim never takes a send that is sending", func(t *testing.T) {
			id := send(t, env, sendoncetest.Mail("bob@example.com", "claimed again"))
			forceSending(t, env, id, env.Clock.Now().Add(time.Hour))
			if n, err := env.Server.Deliver.RunOnce(ctx); err != nil || n != 0 {
				t.Fatalf("RunOnce = %d, %v; want no attempt", n, err)
			}
			s := getSend(t, env, id)
			if st := str(s, "status"); st != string(core.StatusSending) {
				t.Errorf("status %q, want still sending (only the rescuer decides it)", st)
			}
			if got := attempts(t, s); got != 0 {
				t.Errorf("attempts = %d, want 0", got)
			}
		})

		if c := env.SMTP.Connections(); c != 0 {
			t.Errorf("SMTP connections = %d, want 0: nothing may be sent", c)
		}
	})
}

func TestBackoff_StaysWithinEqualJitterBounds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		base, max time.Duration
	}{
		{10 * time.Millisecond, time.Second},
		{5 * time.Second, time.Hour},
		{time.Nanosecond, 100 * time.Nanosecond},
	} {
		for n := 1; n <= 12; n++ {
			d := c.base
			for i := 1; i < n; i++ {
				d *= 2
			}
			d = min(d, c.max)
			lo, hi := d, time.Duration(0)
			for range 2000 {
				got := delivery.Backoff(c.base, c.max, n)
				if got < d/2 || got > d {
					t.Fatalf("Backoff(%v, %v, %d) = %v, want within [%v, %v]", c.base, c.max, n, got, d/2, d)
				}
				lo, hi = min(lo, got), max(hi, got)
			}
			if d >= 1000 && (lo > d*6/10 || hi < d*9/10) {
				t.Errorf("Backoff(%v, %v, %d): 2000 samples only spanned [%v, %v] of [%v, %v]; want jitter over the range", c.base, c.max, n, lo, hi, d/2, d)
			}
		}
	}
}

// recipientStatuses maps each recipient of a send object to its status.
func recipientStatuses(s map[string]any) map[string]string {
	out := map[string]string{}
	rs, _ := s["recipients"].([]any)
	for _, r := range rs {
		m, _ := r.(map[string]any)
		email, _ := m["email"].(string)
		st, _ := m["status"].(string)
		out[email] = st
	}
	return out
}

// checkRecipients checks the status of every recipient of send s.
func checkRecipients(t *testing.T, s map[string]any, want map[string]string) {
	t.Helper()
	if got := recipientStatuses(s); !maps.Equal(got, want) {
		t.Errorf("recipients %v, want %v", got, want)
	}
}

// suppressedEvents lists the recipients of a send's email.suppressed events.
func suppressedEvents(s map[string]any) []string {
	return eventFields(s, core.EventSuppressed, "recipient")
}

func TestDeliver_SuppressedRecipientIsNotAttempted(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase})
		env.Exec(t, "INSERT INTO suppressions (tenant,address,reason,created_at,id) VALUES ('default','x@example.com','test',0,'sup_1')")

		// Every recipient suppressed: nothing attempted, the send ends suppressed.
		id := send(t, env, sendoncetest.Mail("X Person <X@example.com>", "suppressed"))
		s := env.WaitStatus(t, id, waitLong, core.StatusSuppressed)
		if got := attempts(t, s); got != 0 {
			t.Errorf("all suppressed: attempts = %d, want 0", got)
		}
		if ev := eventTypes(s); slices.Contains(ev, "attempt_started") || !slices.Equal(suppressedEvents(s), []string{"x@example.com"}) {
			t.Errorf("all suppressed: events %v, want one email.suppressed for x@example.com and no attempt", ev)
		}
		if got := recipientStatuses(s); got["X@example.com"] != "suppressed" {
			t.Errorf("all suppressed: recipients %v", got)
		}
		time.Sleep(settle)
		if c := env.SMTP.Connections(); c != 0 {
			t.Fatalf("all suppressed: %d SMTP connections, want none", c)
		}

		// One of three suppressed: the others are attempted, it is skipped.
		id = send(t, env, map[string]any{"to": "ok@example.com", "bcc": []string{"y@example.com", "x@example.com"}, "subject": "suppressed bcc", "text": "x"})
		s = env.WaitStatus(t, id, waitLong, core.StatusSent)
		msgs := env.SMTP.Messages()
		if len(msgs) != 1 || !slices.Equal(msgs[0].To, []string{"ok@example.com", "y@example.com"}) {
			t.Fatalf("partly suppressed: relay got %+v, want one message to ok@ and y@ only", msgs)
		}
		want := map[string]string{"ok@example.com": "sent", "y@example.com": "sent", "x@example.com": "suppressed"}
		if got := recipientStatuses(s); !maps.Equal(got, want) {
			t.Errorf("partly suppressed: recipients %v, want %v", got, want)
		}
		if got := suppressedEvents(s); !slices.Equal(got, []string{"x@example.com"}) {
			t.Errorf("partly suppressed: email.suppressed for %v, want x@example.com once", got)
		}
	})
}

// due reports whether the send row is a delivery job some claim will take:
// queued with a time it is due at.
func due(t *testing.T, env *sendoncetest.Env, id string) bool {
	t.Helper()
	return env.QueryInt(t, `SELECT count(*) FROM sends
		WHERE id = ? AND status = 'queued' AND next_attempt_at IS NOT NULL`, id) == 1
}

func TestStop_AcceptedSendsAreNeverLost(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		t.Run("relay up", func(t *testing.T) {
			// Most sends go out before Stop; none may go out twice.
			t.Parallel()
			stopAndRestart(t, backend, nil, -1)
		})
		t.Run("relay failing", func(t *testing.T) {
			// Every send is still queued (waiting for a retry) at Stop: only
			// the restarted instance can deliver them.
			t.Parallel()
			stopAndRestart(t, backend, &smtptest.Behaviour{DataErr: reply451}, 0)
		})
	})
}

// stopAndRestart accepts sends, stops the instance at once, then restarts
// it on the same database with a working relay. wantBefore is how many must
// have been delivered before the stop, -1 for any number.
func stopAndRestart(t *testing.T, backend sendoncetest.Backend, relay *smtptest.Behaviour, wantBefore int) {
	base := retryBase
	if relay != nil {
		base = 200 * time.Millisecond // a few retries before Stop, far from MaxAttempts
	}
	env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: base})
	if relay != nil {
		env.SMTP.SetBehaviour(*relay)
	}
	var ids []string
	for i := range 6 {
		ids = append(ids, send(t, env, sendoncetest.Mail(fmt.Sprintf("r%d@example.com", i), fmt.Sprintf("stop %d", i))))
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := env.Server.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	delivered := 0
	for _, id := range ids {
		s, err := env.Server.Store.Send(ctx, "default", id)
		if err != nil {
			t.Fatal(err)
		}
		switch s.Status {
		case core.StatusSent:
			delivered++
		case core.StatusQueued:
			if !due(t, env, id) {
				t.Errorf("%s is queued after Stop but no claim will take it", id)
			}
		default:
			t.Errorf("%s is %s after Stop, want sent or still queued", id, s.Status)
		}
	}
	t.Logf("%d of %d sends delivered before Stop", delivered, len(ids))
	if wantBefore >= 0 && delivered != wantBefore {
		t.Errorf("%d sends delivered before Stop, want %d", delivered, wantBefore)
	}
	first := env.SMTP.MessageIDCounts()
	if n := len(env.SMTP.Messages()); n != delivered {
		t.Errorf("SMTP server got %d messages before Stop, but %d sends are sent", n, delivered)
	}
	env.Close()

	env2 := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, DB: env.DB, SMTP: true, RetryBase: retryBase})
	for _, id := range ids {
		env2.WaitStatus(t, id, waitLong, core.StatusSent)
	}
	time.Sleep(settle)
	second := env2.SMTP.MessageIDCounts()
	for _, id := range ids {
		mid := bareID(str(getSend(t, env2, id), "message_id"))
		if total := first[mid] + second[mid]; total != 1 {
			t.Errorf("%s delivered %d times (before stop %d, after restart %d), want exactly once", id, total, first[mid], second[mid])
		}
	}
}

func TestStop_FinishesAnAttemptInFlight(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, RetryBase: retryBase})
		env.SMTP.SetBehaviour(smtptest.Behaviour{DelayData: 300 * time.Millisecond})
		id := send(t, env, sendoncetest.Mail("ann@example.com", "slow relay"))
		env.WaitStatus(t, id, waitLong, core.StatusSending)

		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		if err := env.Server.Stop(ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		s, err := env.Server.Store.Send(ctx, "default", id)
		if err != nil {
			t.Fatal(err)
		}
		if s.Status != core.StatusSent || s.Attempts != 1 {
			t.Errorf("after Stop the in-flight send is %s with %d attempts, want sent after 1", s.Status, s.Attempts)
		}
		if n := len(env.SMTP.Messages()); n != 1 {
			t.Errorf("SMTP server got %d messages, want 1", n)
		}
	})
}

// A stalled attempt that finishes after the rescuer declared its send
// unknown does not move the send out of unknown (reconcile is the only way
// out); what it saw is kept as an event for whoever reconciles.
func TestDeliver_LateResultAfterRescueStaysUnknown(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, SMTP: true, NoWorkers: true, Lease: time.Minute})
		env.SMTP.SetBehaviour(smtptest.Behaviour{DelayData: 700 * time.Millisecond})
		id := send(t, env, sendoncetest.Mail("ann@example.com", "late"))

		ctx := context.Background()
		done := make(chan error, 1)
		go func() {
			_, err := env.Server.Deliver.RunOnce(ctx)
			done <- err
		}()
		// Wait until the attempt holds the send, then let its lease run out.
		deadline := time.Now().Add(waitLong)
		for str(getSend(t, env, id), "status") != string(core.StatusSending) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		env.Clock.Advance(2 * time.Minute)
		if n, err := env.Server.Deliver.RescueExpired(ctx); err != nil || n != 1 {
			t.Fatalf("RescueExpired = %d, %v; want 1", n, err)
		}
		if err := <-done; err != nil {
			t.Fatalf("attempt: %v", err)
		}
		s := getSend(t, env, id)
		if st := str(s, "status"); st != string(core.StatusUnknown) {
			t.Fatalf("status %q after a late 250, want unknown", st)
		}
		if ev := eventTypes(s); countOf(ev, "late_attempt_result") != 1 {
			t.Fatalf("events %v: want one late_attempt_result", ev)
		}
		if n := len(env.SMTP.Messages()); n != 1 {
			t.Fatalf("relay got %d messages, want 1", n)
		}
	})
}
