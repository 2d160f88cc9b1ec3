package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracer starts spans on a provider. Its zero value, and one made from
// the no-op provider, is off: Start returns the context as it is and a
// span that records nothing, so that a process without OTEL_* pays no
// allocation per request or attempt.
type Tracer struct {
	t trace.Tracer
}

// New returns the tracer of the part of sendonce named scope on tp; off
// when tp is nil or the no-op provider.
func New(tp trace.TracerProvider, scope string) Tracer {
	switch tp.(type) {
	case nil, noop.TracerProvider, *noop.TracerProvider:
		return Tracer{}
	}
	return Tracer{t: tp.Tracer(scope)}
}

// Enabled reports whether spans are made.
func (t Tracer) Enabled() bool { return t.t != nil }

// noSpan is what an off Tracer returns: it records nothing.
var noSpan = trace.SpanFromContext(context.Background())

// Start starts a span of kind named name, a child of the span in ctx.
// Attributes are set by the caller under span.IsRecording(), so that an
// off tracer costs not even their slice.
func (t Tracer) Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if t.t == nil {
		return ctx, noSpan
	}
	return t.t.Start(ctx, name, trace.WithSpanKind(kind))
}

// traceContext reads and writes the W3C traceparent header.
var traceContext propagation.TraceContext

// TraceParent is the W3C traceparent of the span in ctx ("" when there is
// none): what a send keeps so that its attempts continue the trace.
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	return c.Get("traceparent")
}

// WithParent returns ctx with the span a traceparent names as the parent
// of the spans started on it; ctx as it is when traceparent is empty or
// not valid.
func WithParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// FromHeaders returns ctx with the caller's trace (the traceparent and
// tracestate request headers), if it sent one.
func FromHeaders(ctx context.Context, h http.Header) context.Context {
	return traceContext.Extract(ctx, propagation.HeaderCarrier(h))
}

// The attributes sendonce's spans carry: ids and classes only, never an
// address, a subject, a key or a secret.
const (
	SendID        = attribute.Key("sendonce.send.id")
	Tenant        = attribute.Key("sendonce.tenant")
	TransportKind = attribute.Key("sendonce.transport.kind")
	// Outcome is a class: an attempt's (sent, tempfail, permfail, …), an
	// acceptance's or a receipt's ("accepted", "received", "duplicate"
	// or the error's code).
	Outcome  = attribute.Key("sendonce.outcome")
	Status   = attribute.Key("sendonce.send.status")
	Attempt  = attribute.Key("sendonce.attempt")
	Mailbox  = attribute.Key("sendonce.mailbox.id")
	Received = attribute.Key("sendonce.received.id")
	Source   = attribute.Key("sendonce.source")
	Webhook  = attribute.Key("sendonce.webhook.id")
	Event    = attribute.Key("sendonce.event.id")
)

// End ends span with outcome as its sendonce.outcome and, when failed,
// the error status described by outcome alone: an error's text may name
// addresses.
func End(span trace.Span, failed bool, outcome string) {
	if span.IsRecording() {
		span.SetAttributes(Outcome.String(outcome))
		if failed {
			span.SetStatus(codes.Error, outcome)
		}
	}
	span.End()
}
