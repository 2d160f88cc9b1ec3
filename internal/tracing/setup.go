// Package tracing is sendonce's OpenTelemetry: the tracer provider made
// from the standard OTEL_* variables (OTLP over HTTP/protobuf), the Tracer
// the other packages start their spans with, and the W3C traceparent a
// send keeps so that the worker that delivers it continues the trace of
// the request that accepted it.
//
// Unset, nothing is installed: Setup returns the no-op provider, a Tracer
// made from it starts no span and allocates nothing, and no exporter or
// batching goroutine runs.
package tracing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// DefaultServiceName is service.name unless OTEL_SERVICE_NAME says
// otherwise.
const DefaultServiceName = "sendonce"

// The variables Setup reads itself. The exporter and the SDK read the
// other standard ones (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT,
// _COMPRESSION, OTEL_TRACES_SAMPLER, OTEL_BSP_*, OTEL_RESOURCE_ATTRIBUTES)
// from the process's environment.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvServiceName    = "OTEL_SERVICE_NAME"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
)

// Shutdown flushes the spans still buffered and stops the exporter.
type Shutdown func(ctx context.Context) error

// Setup makes the process's tracer provider from the environment (getenv):
// an OTLP/HTTP exporter to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or to
// OTEL_EXPORTER_OTLP_ENDPOINT's /v1/traces, behind a batching processor,
// with service.name (default "sendonce"), service.version (version),
// service.instance.id and process.pid on every span. With neither endpoint
// set (or OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none) it is the
// no-op provider, and shutdown does nothing. The global provider is left
// alone: the provider is handed to the parts that make spans.
func Setup(ctx context.Context, getenv func(string) string, version string) (trace.TracerProvider, Shutdown, error) {
	endpoint, err := endpointURL(getenv)
	if err != nil {
		return nil, nil, err
	}
	if endpoint == "" || off(getenv) {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint))
	if err != nil {
		return nil, nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithService(), // service.instance.id
		resource.WithProcessPID(),
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName), attribute.String("service.version", version)),
		resource.WithFromEnv(),
		resource.WithAttributes(attribute.String("service.name", cmp.Or(strings.TrimSpace(getenv(EnvServiceName)), DefaultServiceName))),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, nil, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// off reports whether the variables turn the SDK off although an endpoint
// is set.
func off(getenv func(string) string) bool {
	return strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") ||
		strings.EqualFold(strings.TrimSpace(getenv(EnvTracesExporter)), "none")
}

// endpointURL is where spans go, "" when nowhere: the traces endpoint as
// it is, else the general endpoint with /v1/traces added (the OTLP/HTTP
// rules for the two variables).
func endpointURL(getenv func(string) string) (string, error) {
	if v := strings.TrimSpace(getenv(EnvTracesEndpoint)); v != "" {
		if _, err := parseEndpoint(EnvTracesEndpoint, v); err != nil {
			return "", err
		}
		return v, nil
	}
	v := strings.TrimSpace(getenv(EnvEndpoint))
	if v == "" {
		return "", nil
	}
	u, err := parseEndpoint(EnvEndpoint, v)
	if err != nil {
		return "", err
	}
	u.Path = path.Join("/", u.Path, "v1/traces")
	return u.String(), nil
}

func parseEndpoint(name, v string) (*url.URL, error) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: %q is not an http:// or https:// URL", name, v)
	}
	return u, nil
}
