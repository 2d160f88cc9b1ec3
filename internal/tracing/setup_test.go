package tracing_test

import (
	"bytes"
	"context"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sendonce/sendonce/internal/testkit/otlptest"
	"github.com/sendonce/sendonce/internal/tracing"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// sdkGoroutines counts the goroutines running the SDK's code (the batching
// processor's loop, the exporter's).
func sdkGoroutines(t *testing.T) int {
	t.Helper()
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, "go.opentelemetry.io/otel/sdk/") || strings.Contains(g, "go.opentelemetry.io/otel/exporters/") {
			n++
		}
	}
	return n
}

// Without an endpoint, Setup installs nothing: the no-op provider, no
// goroutine of the SDK, and a Tracer whose spans allocate nothing.
func TestSetup_OffWithoutAnEndpoint(t *testing.T) {
	for name, getenv := range map[string]func(string) string{
		"unset":    env(tracing.EnvServiceName, "mail", "OTEL_BSP_SCHEDULE_DELAY", "10"),
		"disabled": env(tracing.EnvEndpoint, "http://127.0.0.1:1", tracing.EnvSDKDisabled, "true"),
		"none":     env(tracing.EnvTracesEndpoint, "http://127.0.0.1:1/v1/traces", tracing.EnvTracesExporter, "none"),
	} {
		t.Run(name, func(t *testing.T) {
			before := sdkGoroutines(t)
			tp, shutdown, err := tracing.Setup(context.Background(), getenv, "v1.2.3")
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := tp.(noop.TracerProvider); !ok {
				t.Fatalf("provider is %T, want the no-op one", tp)
			}
			// A goroutine just made shows the SDK's frames only once it
			// runs: look for a while (it cannot be waited for, as it must
			// not come).
			for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				if n := sdkGoroutines(t); n != before {
					t.Fatalf("%d goroutines of the SDK running after Setup, %d before: an exporter started", n, before)
				}
			}
			tr := tracing.New(tp, "test")
			if tr.Enabled() {
				t.Fatal("a tracer on the no-op provider says it is enabled")
			}
			ctx := context.Background()
			if allocs := testing.AllocsPerRun(100, func() {
				c, span := tr.Start(ctx, "x", trace.SpanKindInternal)
				if c != ctx || span.IsRecording() {
					t.Fatal("an off tracer made a span")
				}
				span.End()
			}); allocs != 0 {
				t.Fatalf("an off tracer's span costs %v allocations, want 0", allocs)
			}
			if err := shutdown(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// With an endpoint, spans reach it as OTLP/HTTP protobuf, with the
// resource's service name and version, and a span started under a stored
// traceparent is its child. Its batching goroutine (which the test above
// counts) stops at shutdown.
func TestSetup_ExportsToTheEndpoint(t *testing.T) {
	for name, endpoint := range map[string]func(*otlptest.Receiver) func(string) string{
		"base": func(r *otlptest.Receiver) func(string) string { return env(tracing.EnvEndpoint, r.URL) },
		"traces": func(r *otlptest.Receiver) func(string) string {
			return env(tracing.EnvTracesEndpoint, r.URL+"/v1/traces")
		},
	} {
		t.Run(name, func(t *testing.T) {
			recv := otlptest.Start(t)
			before := sdkGoroutines(t)
			tp, shutdown, err := tracing.Setup(context.Background(), endpoint(recv), "v1.2.3")
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := tp.(*sdktrace.TracerProvider); !ok {
				t.Fatalf("provider is %T, want the SDK's", tp)
			}
			for deadline := time.Now().Add(5 * time.Second); sdkGoroutines(t) <= before; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no goroutine of the SDK after Setup with an endpoint: the count sees nothing")
				}
			}
			tr := tracing.New(tp, "test")
			ctx, parent := tr.Start(context.Background(), "accept", trace.SpanKindProducer)
			tp1 := tracing.TraceParent(ctx)
			parent.End()
			_, child := tr.Start(tracing.WithParent(context.Background(), tp1), "attempt", trace.SpanKindConsumer)
			child.End()
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := shutdown(sctx); err != nil {
				t.Fatal(err)
			}
			a := recv.WaitSpan(t, 5*time.Second, "accept span", func(s otlptest.Span) bool { return s.Name == "accept" })
			c := recv.WaitSpan(t, 5*time.Second, "attempt span", func(s otlptest.Span) bool { return s.Name == "attempt" })
			if c.TraceID != a.TraceID || c.ParentSpanID != a.SpanID {
				t.Errorf("attempt is trace %s parent %s; want trace %s parent %s", c.TraceID, c.ParentSpanID, a.TraceID, a.SpanID)
			}
			if a.Resource["service.name"] != "sendonce" || a.Resource["service.version"] != "v1.2.3" {
				t.Errorf("resource %v: want service.name sendonce, service.version v1.2.3", a.Resource)
			}
			if a.Resource["process.pid"] == "" || a.Resource["service.instance.id"] == "" {
				t.Errorf("resource %v: want process.pid and service.instance.id", a.Resource)
			}
			waitGone(t, before)
		})
	}
}

func waitGone(t *testing.T, want int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); sdkGoroutines(t) > want; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the SDK's goroutines still run after shutdown")
		}
	}
}

func TestSetup_ServiceNameFromTheEnvironment(t *testing.T) {
	recv := otlptest.Start(t)
	tp, shutdown, err := tracing.Setup(context.Background(), env(tracing.EnvEndpoint, recv.URL, tracing.EnvServiceName, "mail-eu"), "dev")
	if err != nil {
		t.Fatal(err)
	}
	_, span := tracing.New(tp, "test").Start(context.Background(), "x", trace.SpanKindInternal)
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := recv.WaitSpan(t, 5*time.Second, "span", func(otlptest.Span) bool { return true })
	if got := s.Resource["service.name"]; got != "mail-eu" {
		t.Errorf("service.name %q, want OTEL_SERVICE_NAME's mail-eu", got)
	}
}

func TestSetup_RefusesAnEndpointThatIsNoURL(t *testing.T) {
	for _, v := range []string{"127.0.0.1:4318", "ftp://host", "http://"} {
		if _, _, err := tracing.Setup(context.Background(), env(tracing.EnvEndpoint, v), "dev"); err == nil {
			t.Errorf("%s=%q: no error", tracing.EnvEndpoint, v)
		}
	}
}

func TestTraceParent_EmptyWithoutASpan(t *testing.T) {
	if got := tracing.TraceParent(context.Background()); got != "" {
		t.Errorf("TraceParent of a context without a span = %q", got)
	}
	if ctx := tracing.WithParent(context.Background(), "not a traceparent"); trace.SpanContextFromContext(ctx).IsValid() {
		t.Error("a malformed traceparent gave a parent")
	}
}
