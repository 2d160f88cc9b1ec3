package delivery_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/delivery"
	"github.com/sendonce/sendonce/internal/server"
	"github.com/sendonce/sendonce/internal/testkit/faultproxy"
	"github.com/sendonce/sendonce/internal/testkit/resendtest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/seslocal"
	"github.com/sendonce/sendonce/internal/transport"
)

const resendKey = "re_delivery_test"

func resendURL(host string) string { return "resend://" + resendKey + "@" + host + "?tls=none" }

func sesURL(endpoint string) string {
	return "ses://AKIDTEST:secret@eu-west-1?endpoint=" + endpoint
}

var providerMail = map[string]any{"to": "ann@example.com", "subject": "Hello", "text": "Hi."}

// handoffs are the attempt's handoff entries, in order.
func handoffs(s map[string]any) []string { return eventFields(s, core.EventHandoff, "detail") }

func TestProviders_ResendTakesTheSendOnce(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		rs := resendtest.Start(t, resendKey)
		// The first answer is lost: the same request again, same key.
		rs.SetPlan(func(n int) resendtest.Fault {
			if n == 1 {
				return resendtest.Drop
			}
			return resendtest.Pass
		})
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, Transport: resendURL(rs.Host), RetryBase: retryBase})
		id := send(t, env, providerMail)
		s := env.WaitStatus(t, id, waitLong, core.StatusSent)
		emails := rs.Emails()
		if len(emails) != 1 {
			t.Fatalf("Resend holds %d emails, want 1", len(emails))
		}
		if str(s, "provider") != "resend" || str(s, "provider_message_id") != emails[0].ID {
			t.Errorf("provider %q %q; want resend %q", s["provider"], s["provider_message_id"], emails[0].ID)
		}
		for _, r := range rs.Requests() {
			if r.IdempotencyKey != transport.ResendIdempotencyKey(id) {
				t.Errorf("request %d key %q", r.N, r.IdempotencyKey)
			}
		}
		if h := handoffs(s); len(h) != 1 || !strings.Contains(h[0], "accepted as "+emails[0].ID) || strings.Contains(h[0], resendKey) {
			t.Errorf("handoffs %q", h)
		}
	})
}

// Every answer of the first attempt lost: the send is retried later, on
// Resend only and with the same key, and Resend still holds one email.
func TestProviders_ResendLostAnswersRetriedLaterWithTheSameKey(t *testing.T) {
	rs := resendtest.Start(t, resendKey)
	rs.SetPlan(func(n int) resendtest.Fault {
		if n <= 3 { // the first attempt's three requests
			return resendtest.Drop
		}
		return resendtest.Pass
	})
	fallback := resendtest.Start(t, resendKey)
	env := sendoncetest.Start(t, sendoncetest.Options{Transport: resendURL(rs.Host), RetryBase: retryBase,
		Providers: server.ProvidersConfig{Fallbacks: []string{resendURL(fallback.Host)}}})
	id := send(t, env, providerMail)
	s := env.WaitStatus(t, id, waitLong, core.StatusSent)
	if n := len(rs.Emails()); n != 1 {
		t.Errorf("Resend holds %d emails, want 1", n)
	}
	if n := len(fallback.Requests()); n != 0 {
		t.Errorf("the fallback got %d requests: a maybe-accepted send fell over", n)
	}
	if n := len(rs.Requests()); n != 4 {
		t.Errorf("%d requests, want 3 lost and 1 answered", n)
	}
	if !strings.Contains(strings.Join(eventTypes(s), ","), "delivery_delayed") {
		t.Errorf("events %v: no retry", eventTypes(s))
	}
}

func TestProviders_SESSendsRawAndRecordsItsID(t *testing.T) {
	emu := seslocal.Start(t)
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, Transport: sesURL(emu.URL), RetryBase: retryBase})
		id := send(t, env, providerMail)
		s := env.WaitStatus(t, id, waitLong, core.StatusSent)
		var found bool
		for _, m := range emu.Emails(t) {
			if m.MessageID == str(s, "provider_message_id") {
				found = m.Subject == "Hello"
			}
		}
		if str(s, "provider") != "ses" || !found {
			t.Errorf("provider %v %v not in the emulator's store", s["provider"], s["provider_message_id"])
		}
	})
}

// The primary refuses connections: the fallback takes the send once, and
// the attempt records both.
func TestProviders_RefusedPrimaryFallsOver(t *testing.T) {
	fallback := resendtest.Start(t, resendKey)
	primary := resendURL("127.0.0.1:" + closedPort(t))
	env := sendoncetest.Start(t, sendoncetest.Options{Transport: primary, RetryBase: retryBase,
		Providers: server.ProvidersConfig{Fallbacks: []string{resendURL(fallback.Host)}}})
	id := send(t, env, providerMail)
	s := env.WaitStatus(t, id, waitLong, core.StatusSent)
	time.Sleep(settle)
	if n := len(fallback.Emails()); n != 1 {
		t.Errorf("the fallback holds %d emails, want 1", n)
	}
	h := handoffs(s)
	if len(h) != 2 || !strings.Contains(h[0], "not accepted") || !strings.Contains(h[1], "accepted as") {
		t.Errorf("handoffs %q", h)
	}
}

// The primary (SES) takes the request and its answer never comes (the
// attempt's deadline passes): the send is unknown, the fallback is never
// asked, and there is one message in all.
func TestProviders_AmbiguousPrimaryNeverFallsOver(t *testing.T) {
	emu := seslocal.Start(t)
	px := faultproxy.Start(t, faultproxy.Options{Upstream: emu.URL, Delay: 30 * time.Second,
		Plan: faultproxy.Always("POST", "/v2/email/outbound-emails", faultproxy.Delay)})
	fallback := resendtest.Start(t, resendKey)
	env := sendoncetest.Start(t, sendoncetest.Options{Transport: sesURL(px.URL), RetryBase: retryBase, Lease: 3 * time.Second,
		Providers: server.ProvidersConfig{Fallbacks: []string{resendURL(fallback.Host)}}})
	before := len(emu.Emails(t))
	id := send(t, env, providerMail)
	s := env.WaitStatus(t, id, waitLong, core.StatusUnknown)
	time.Sleep(settle)
	if n := len(emu.Emails(t)) - before; n != 1 {
		t.Errorf("SES holds %d messages, want 1", n)
	}
	if n := len(fallback.Requests()); n != 0 {
		t.Errorf("the fallback got %d requests", n)
	}
	if n := px.Count("POST", "/v2/email/outbound-emails"); n != 1 {
		t.Errorf("SES got %d requests, want 1", n)
	}
	if s["provider"] != nil {
		t.Errorf("provider %v shown before a provider accepted", s["provider"])
	}
	if h := handoffs(s); len(h) != 1 || !strings.Contains(h[0], "outcome unknown") {
		t.Errorf("handoffs %q", h)
	}
}

// A primary that keeps refusing is passed over once its breaker opens:
// the next sends go straight to the fallback.
func TestProviders_BreakerPassesADeadPrimaryOver(t *testing.T) {
	fallback := resendtest.Start(t, resendKey)
	primary := resendURL("127.0.0.1:" + closedPort(t))
	env := sendoncetest.Start(t, sendoncetest.Options{Transport: primary, RetryBase: retryBase,
		Providers: server.ProvidersConfig{Fallbacks: []string{resendURL(fallback.Host)}}})
	var last map[string]any
	for range delivery.BreakerTrips + 1 {
		id := send(t, env, providerMail)
		last = env.WaitStatus(t, id, waitLong, core.StatusSent)
	}
	h := handoffs(last)
	if len(h) != 2 || !strings.Contains(h[0], "circuit breaker is open") {
		t.Errorf("handoffs of the send after %d refusals: %q", delivery.BreakerTrips, h)
	}
	if n := len(fallback.Emails()); n != delivery.BreakerTrips+1 {
		t.Errorf("the fallback holds %d emails", n)
	}
	r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/metrics"})
	if !strings.Contains(string(r.Body), `sendonce_transport_breaker_open{transport="resend://xxxxx@127.0.0.1:`) {
		t.Errorf("no breaker metric")
	}
}
