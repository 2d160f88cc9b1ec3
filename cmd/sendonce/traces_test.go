package main_test

import (
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/sendonce/sendonce/internal/testkit/otlptest"
	"github.com/sendonce/sendonce/internal/testkit/pgtest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// workerRE is the line a --role worker process logs once it runs (it
// listens on no HTTP address).
var workerRE = regexp.MustCompile(`msg="worker started"|"msg":"worker started"`)

func startServeEnv(t *testing.T, env []string, ready *regexp.Regexp, args ...string) *proc {
	t.Helper()
	p, err := spawnServeEnv(binPath, env, ready, args...)
	if p != nil {
		t.Cleanup(p.kill)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTraces_WorkerAttemptIsInTheTraceOfTheAcceptingRequest: an API
// process and a worker process on one PostgreSQL database, both exporting
// to one OTLP/HTTP receiver. The worker's delivery attempt is a child of
// the API process's acceptance span, itself a child of the request's
// server span: one trace across the two processes, through the
// traceparent stored with the send.
func TestTraces_WorkerAttemptIsInTheTraceOfTheAcceptingRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two servers")
	}
	db := pgtest.NewDatabase(t)
	smtpd := smtptest.Start(t, smtptest.Options{})
	recv := otlptest.Start(t)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.URL, "OTEL_BSP_SCHEDULE_DELAY=100"}
	common := []string{"--db", db, "--transport", "smtp://" + smtpd.Addr + "?tls=none", "--poll-interval", "20ms"}
	apiProc := startServeEnv(t, env, listenRE, append(common, "--role", "api")...) // migrates the empty database
	secret := createKey(t, db, "traces", "send,read")
	worker := startServeEnv(t, env, workerRE, append(common, "--role", "worker")...)

	a := api{t: t, url: apiProc.url, secret: secret, hc: &http.Client{Timeout: 10 * time.Second}}
	v := a.send("traced-1")
	if got := a.waitDecided([]string{v.ID}, 30*time.Second)[v.ID].Status; got != "sent" {
		t.Fatalf("send is %s, want sent", got)
	}
	apiPID, workerPID := strconv.Itoa(apiProc.cmd.Process.Pid), strconv.Itoa(worker.cmd.Process.Pid)
	from := func(pid string, name string, kind tracepb.Span_SpanKind) func(otlptest.Span) bool {
		return func(s otlptest.Span) bool {
			return s.Resource["process.pid"] == pid && s.Name == name && s.Kind == kind &&
				(s.Attrs["sendonce.send.id"] == v.ID || s.Kind == tracepb.Span_SPAN_KIND_SERVER)
		}
	}
	const wait = 20 * time.Second
	req := recv.WaitSpan(t, wait, "server span of POST /v1/send from the api process",
		from(apiPID, "POST /v1/send", tracepb.Span_SPAN_KIND_SERVER))
	acc := recv.WaitSpan(t, wait, "acceptance span from the api process",
		from(apiPID, "sendonce.accept", tracepb.Span_SPAN_KIND_PRODUCER))
	att := recv.WaitSpan(t, wait, "delivery attempt span from the worker process",
		from(workerPID, "sendonce.delivery.attempt", tracepb.Span_SPAN_KIND_CONSUMER))

	if acc.TraceID != req.TraceID || acc.ParentSpanID != req.SpanID {
		t.Errorf("acceptance: trace %s parent %s; want the request's trace %s, parent %s", acc.TraceID, acc.ParentSpanID, req.TraceID, req.SpanID)
	}
	if att.TraceID != req.TraceID || att.ParentSpanID != acc.SpanID {
		t.Errorf("attempt in the worker: trace %s parent %s; want the request's trace %s, parent the acceptance %s",
			att.TraceID, att.ParentSpanID, req.TraceID, acc.SpanID)
	}
	if att.Resource["service.instance.id"] == req.Resource["service.instance.id"] {
		t.Errorf("both processes are service.instance.id %s", req.Resource["service.instance.id"])
	}
	for _, s := range []otlptest.Span{req, att} {
		if s.Resource["service.name"] != "sendonce" {
			t.Errorf("%s: service.name %q, want sendonce", s.Name, s.Resource["service.name"])
		}
	}
	if att.Attrs["sendonce.outcome"] != "sent" || att.Attrs["sendonce.transport.kind"] != "smtp" || att.Attrs["sendonce.tenant"] == "" {
		t.Errorf("attempt attributes %v: want outcome sent, transport kind smtp, a tenant", att.Attrs)
	}
	if req.Attrs["http.route"] != "/v1/send" || req.Attrs["http.response.status_code"] != "200" {
		t.Errorf("request attributes %v: want http.route /v1/send and status 200", req.Attrs)
	}
	requireNothingPrivate(t, recv.Spans(), v.ID, secret, "traced-1@example.com", "Handoff traced-1")
}

// requireNothingPrivate fails when a span names a path with its id, or
// carries an address, a subject or a key in any attribute.
func requireNothingPrivate(t *testing.T, spans []otlptest.Span, sendID string, private ...string) {
	t.Helper()
	for _, s := range spans {
		if strings.Contains(s.Name, sendID) {
			t.Errorf("span name %q has the send's id: the route pattern, not the path", s.Name)
		}
		for _, m := range []map[string]string{s.Attrs, s.Resource} {
			for k, val := range m {
				for _, p := range private {
					if strings.Contains(val, p) || strings.Contains(val, "/v1/sends/"+sendID) {
						t.Errorf("span %s: attribute %s = %q carries %q", s.Name, k, val, p)
					}
				}
			}
		}
	}
}

// TestTraces_NothingExportedWhenUnset: without OTEL_EXPORTER_OTLP_*, a
// server that accepts and delivers a send, then stops (when a provider
// would flush), connects to nothing on 127.0.0.1:4318, where the exporter
// sends by default (over TLS: a connection is what it would leave).
func TestTraces_NothingExportedWhenUnset(t *testing.T) {
	binaryTest(t)
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		if _, set := os.LookupEnv(v); set {
			t.Fatalf("the test's environment sets %s: this test needs it unset", v)
		}
	}
	recv := otlptest.StartOn(t, "127.0.0.1:4318")
	db := "sqlite:" + t.TempDir() + "/sendonce.db"
	secret := createKey(t, db, "untraced", "send,read")
	p := startServeEnv(t, []string{"OTEL_SERVICE_NAME=sendonce-untraced", "OTEL_BSP_SCHEDULE_DELAY=50"}, listenRE,
		"--db", db, "--poll-interval", "20ms")
	a := api{t: t, url: p.url, secret: secret, hc: &http.Client{Timeout: 10 * time.Second}}
	v := a.send("untraced-1")
	if got := a.waitDecided([]string{v.ID}, 30*time.Second)[v.ID].Status; got != "sent" {
		t.Fatalf("send is %s, want sent", got)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(t, p, 30*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logText())
	}
	if n, c := recv.Requests(), recv.Connections(); n != 0 || c != 0 {
		t.Fatalf("%d export requests on %d connections reached the default endpoint with the variables unset", n, c)
	}
}
