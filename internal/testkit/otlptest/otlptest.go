// Package otlptest runs an OTLP/HTTP trace receiver on 127.0.0.1 for
// tests: it decodes the collector's ExportTraceServiceRequest (protobuf,
// gzip or not) with the official generated types and keeps every span,
// with its resource's attributes, for the test to look at.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened: ids in hex, attribute values as
// text.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          tracepb.Span_SpanKind
	Attrs                         map[string]string
	// Resource is the attributes of the resource that sent it
	// (service.name, process.pid, …).
	Resource map[string]string
	// Error: its status is an error.
	Error bool
}

// Receiver is a running OTLP/HTTP trace receiver.
type Receiver struct {
	// URL is the base URL to give OTEL_EXPORTER_OTLP_ENDPOINT; spans are
	// taken at URL + "/v1/traces".
	URL      string
	mu       sync.Mutex
	spans    []Span
	requests int
	conns    int
}

// Start starts a receiver on a free port of 127.0.0.1, closed by
// t.Cleanup.
func Start(t testing.TB) *Receiver {
	t.Helper()
	return StartOn(t, "127.0.0.1:0")
}

// StartOn starts a receiver on addr (a test that needs the exporters'
// default port, 4318); the test fails if addr is taken.
func StartOn(t testing.TB, addr string) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("otlptest: listen on %s: %v", addr, err)
	}
	r := &Receiver{URL: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.export)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			r.mu.Lock()
			r.conns++
			r.mu.Unlock()
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r
}

// maxBody bounds one export request.
const maxBody = 16 << 20

func (r *Receiver) export(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = http.MaxBytesReader(w, req.Body, maxBody)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = io.LimitReader(zr, maxBody)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ex collectortrace.ExportTraceServiceRequest
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "content type "+ct+" is not application/x-protobuf", http.StatusUnsupportedMediaType)
		return
	}
	if err := proto.Unmarshal(b, &ex); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.keep(&ex)
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) keep(ex *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	for _, rs := range ex.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{
					TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Name: s.GetName(), Kind: s.GetKind(),
					Attrs: attrs(s.GetAttributes()), Resource: res,
					Error: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
				})
			}
		}
	}
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return v.String()
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Requests counts the export requests received.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Connections counts the connections made to the receiver, whatever was
// sent on them (an exporter speaking TLS to it makes no request).
func (r *Receiver) Connections() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conns
}

// WaitSpan waits, up to wait, for a span that match accepts, and fails
// the test (listing what came) when none does.
func (r *Receiver) WaitSpan(t testing.TB, wait time.Duration, what string, match func(Span) bool) Span {
	t.Helper()
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		for _, s := range r.Spans() {
			if match(s) {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("otlptest: no %s within %s; got:\n%s", what, wait, r.describe())
		}
	}
}

func (r *Receiver) describe() string {
	var b strings.Builder
	for _, s := range r.Spans() {
		fmt.Fprintf(&b, "  %s trace=%s span=%s parent=%s pid=%s attrs=%v\n", s.Name, s.TraceID, s.SpanID, s.ParentSpanID,
			s.Resource["process.pid"], s.Attrs)
	}
	if b.Len() == 0 {
		return "  (no spans)"
	}
	return b.String()
}
