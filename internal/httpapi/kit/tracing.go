package kit

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/tracing"
)

// startRequest starts a request's server span, a child of the caller's
// trace when it sent a traceparent. Its name is the method alone until the
// route is known (endRequest).
func (s *Base) startRequest(r *http.Request) (context.Context, trace.Span) {
	return s.Tracer.Start(tracing.FromHeaders(r.Context(), r.Header), r.Method, trace.SpanKindServer)
}

// endRequest names the span for its route and ends it. The route is the
// pattern, never the path (ids, addresses); no header, body or key is
// recorded. A 5xx is an error span.
func endRequest(span trace.Span, r *http.Request, status int, key *core.APIKey) {
	if span.IsRecording() {
		route := routeOf(r.Pattern)
		if route != "" {
			span.SetName(r.Method + " " + route)
		}
		span.SetAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", route),
			attribute.Int("http.response.status_code", status))
		if key != nil {
			span.SetAttributes(tracing.Tenant.String(key.Tenant))
		}
		if status >= 500 {
			span.SetStatus(codes.Error, strconv.Itoa(status))
		}
	}
	span.End()
}

// routeOf is a ServeMux pattern without its method ("POST /v1/send" →
// "/v1/send"); "" when no route matched.
func routeOf(pattern string) string {
	if _, path, ok := strings.Cut(pattern, " "); ok {
		return path
	}
	return pattern
}
