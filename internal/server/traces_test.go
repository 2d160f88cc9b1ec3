package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/otlptest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/tracing"
)

// TestTraces_OneTracePerSend: with a provider, a send's request,
// acceptance, delivery attempt and webhook delivery are one trace, each a
// child of the one before it (the webhook of the acceptance), and a
// message received for an inbox is a span of its own, all exported over
// OTLP/HTTP to a real receiver.
func TestTraces_OneTracePerSend(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		recv := otlptest.Start(t)
		getenv := func(k string) string {
			if k == tracing.EnvEndpoint {
				return recv.URL
			}
			return ""
		}
		tp, shutdown, err := tracing.Setup(context.Background(), getenv, "test")
		if err != nil {
			t.Fatal(err)
		}
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, SMTP: true, Inbound: true, TracerProvider: tp})

		var hooked atomic.Int32
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hooked.Add(1) }))
		t.Cleanup(hook.Close)
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/webhooks", Key: env.AdminKey, IdemKey: "wh-traces",
			Body: map[string]any{"endpoint": hook.URL, "events": []string{"email.sent"}}}); r.Status != http.StatusOK && r.Status != http.StatusCreated {
			t.Fatalf("create webhook: %d %s", r.Status, r.Body)
		}
		r := env.Send(t, "traced", sendoncetest.Mail("ada@example.com", "Traced hello"))
		if r.Status != http.StatusOK {
			t.Fatalf("send: %d %s", r.Status, r.Body)
		}
		id := r.JSON(t)["id"].(string)
		env.WaitStatus(t, id, 10*time.Second, core.StatusSent)
		for deadline := time.Now().Add(10 * time.Second); hooked.Load() == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the webhook endpoint got nothing")
			}
		}
		mailbox := receiveOne(t, env)
		// Flushes what the batching processor holds: every span above
		// has ended by now.
		if err := shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}

		of := func(name string) func(otlptest.Span) bool {
			return func(s otlptest.Span) bool { return s.Name == name && s.Attrs["sendonce.send.id"] == id }
		}
		req := recv.WaitSpan(t, 5*time.Second, "POST /v1/send span", func(s otlptest.Span) bool { return s.Name == "POST /v1/send" })
		acc := recv.WaitSpan(t, 5*time.Second, "acceptance span", of("sendonce.accept"))
		att := recv.WaitSpan(t, 5*time.Second, "attempt span", of("sendonce.delivery.attempt"))
		wh := recv.WaitSpan(t, 5*time.Second, "webhook delivery span", of("sendonce.webhook.delivery"))
		for _, c := range []struct {
			name         string
			span, parent otlptest.Span
			kind         tracepb.Span_SpanKind
		}{
			{"acceptance", acc, req, tracepb.Span_SPAN_KIND_PRODUCER},
			{"attempt", att, acc, tracepb.Span_SPAN_KIND_CONSUMER},
			{"webhook delivery", wh, acc, tracepb.Span_SPAN_KIND_CLIENT},
		} {
			if c.span.TraceID != req.TraceID || c.span.ParentSpanID != c.parent.SpanID || c.span.Kind != c.kind {
				t.Errorf("%s: trace %s parent %s kind %v; want trace %s parent %s (%s) kind %v", c.name, c.span.TraceID,
					c.span.ParentSpanID, c.span.Kind, req.TraceID, c.parent.SpanID, c.parent.Name, c.kind)
			}
		}
		if wh.Attrs["sendonce.outcome"] != "delivered" || wh.Attrs["http.response.status_code"] != "200" {
			t.Errorf("webhook span attributes %v: want outcome delivered, status 200", wh.Attrs)
		}
		rcv := recv.WaitSpan(t, 5*time.Second, "received message span", func(s otlptest.Span) bool { return s.Name == "sendonce.receive" })
		if rcv.Kind != tracepb.Span_SPAN_KIND_SERVER || rcv.Attrs["sendonce.mailbox.id"] != mailbox ||
			rcv.Attrs["sendonce.outcome"] != "received" || !strings.HasPrefix(rcv.Attrs["sendonce.received.id"], "rcv_") {
			t.Errorf("received span kind %v attributes %v: want server, mailbox %s, outcome received, a rcv_ id", rcv.Kind, rcv.Attrs, mailbox)
		}
	})
}

// receiveOne makes an inbox and hands it one message over SMTP, as an
// MTA would; it returns the inbox's mailbox id.
func receiveOne(t *testing.T, env *sendoncetest.Env) string {
	t.Helper()
	env.OwnDomain(t, "default", "support@recv.test")
	r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/inboxes", Key: env.AdminKey, IdemKey: app.NewID("k"),
		Body: map[string]any{"email_address": "support@recv.test", "name": "Support"}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create inbox: %d %s", r.Status, r.Body)
	}
	inbox := r.JSON(t)["id"].(string)
	c, err := smtp.Dial(env.InboundAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw := "From: Alice <alice@sender.test>\r\nTo: support@recv.test\r\nSubject: Help\r\nMessage-ID: <t1@sender.test>\r\n\r\nHello.\r\n"
	if err := c.SendMail("alice@sender.test", []string{"support@recv.test"}, strings.NewReader(raw)); err != nil {
		t.Fatalf("deliver to the inbound listener: %v", err)
	}
	return inbox
}
