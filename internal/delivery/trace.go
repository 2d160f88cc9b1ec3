package delivery

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/tracing"
	"github.com/sendonce/sendonce/internal/transport"
)

// kindChain is the transport kind of a send handed to its provider chain
// (--transport-fallback, providers.go).
const kindChain = "chain"

// kindOf is the transport kind an attempt's span names for t.
func kindOf(t transport.Transport) string {
	switch t.(type) {
	case nil:
		return string(transport.Capture)
	case *transport.MX:
		return string(transport.Direct)
	case *transport.SMTP:
		return string(transport.Relay)
	}
	return "provider"
}

// kindOf is the transport kind of an attempt's handoff: the server's
// default when the attempt got to no transport (suppressed, deferred, or
// failed before).
func (d *Deliverer) kindOf(h handoff) string {
	if h.kind != "" {
		return h.kind
	}
	return string(d.defaultKind)
}

// startAttempt starts the span of an attempt of s as a child of the span
// that accepted s (its stored traceparent): the attempt is in the trace
// of the request that accepted the send, whichever process makes it. A
// send accepted with tracing off starts a trace of its own.
func (d *Deliverer) startAttempt(ctx context.Context, s *core.Send) (context.Context, trace.Span) {
	ctx, span := d.tracer.Start(tracing.WithParent(ctx, s.TraceParent), "sendonce.delivery.attempt", trace.SpanKindConsumer)
	if span.IsRecording() {
		span.SetAttributes(tracing.SendID.String(s.ID), tracing.Tenant.String(s.Tenant), tracing.Attempt.Int(s.Tries))
	}
	return ctx, span
}

// endAttempt ends an attempt's span with its transport kind, the send's
// new status and the outcome's class; an attempt that failed, or whose
// outcome could not be recorded, is an error span.
func endAttempt(span trace.Span, kind string, o outcome, recordErr error) {
	class := o.metric
	switch {
	case recordErr != nil:
		class = "unrecorded"
	case o.deferred:
		class = "deferred"
	case class == "":
		class = string(o.status)
	}
	if span.IsRecording() {
		span.SetAttributes(tracing.TransportKind.String(kind), tracing.Status.String(string(o.status)))
	}
	failed := recordErr != nil || o.status == core.StatusFailed || o.status == core.StatusBounced || o.status == core.StatusUnknown
	tracing.End(span, failed, class)
}
