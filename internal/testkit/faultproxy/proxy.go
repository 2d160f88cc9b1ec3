// Package faultproxy is an HTTP proxy for tests that sits between a client
// and a real sendonce server and injects the faults a client must survive
// without sending twice: a response dropped after the server processed the
// request, a response delayed past the client's timeout, a 503, and a reset
// connection (before or after the server saw the request).
//
// It listens on 127.0.0.1:0 only, logs every request it saw with the fault
// it injected, and tracks how many requests per Idempotency-Key were in
// flight at once.
package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fault is what the proxy does to one request.
type Fault int

// The faults. "After" faults forward the request first, so the server has
// processed it when the client sees the fault.
const (
	// Pass forwards the request and returns the server's answer.
	Pass Fault = iota
	// Drop forwards the request, reads the server's whole answer, then
	// closes the client's connection without writing a byte.
	Drop
	// Delay forwards the request and holds the server's answer for
	// Options.Delay before writing it (the client has usually given up).
	Delay
	// Unavailable answers 503 without forwarding.
	Unavailable
	// UnavailableAfter forwards the request, then answers 503 instead of
	// the server's answer (a gateway that timed out on a slow upstream).
	UnavailableAfter
	// Reset resets the TCP connection (RST) without forwarding.
	Reset
	// ResetAfter forwards the request, then resets the connection.
	ResetAfter
)

var faultNames = [...]string{"pass", "drop", "delay", "unavailable", "unavailable-after", "reset", "reset-after"}

func (f Fault) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return "fault?"
}

// Forwards reports whether the server sees the request under this fault.
func (f Fault) Forwards() bool { return f != Unavailable && f != Reset }

// Request describes one request to the plan.
type Request struct {
	N      int // 1-based, over all requests
	Method string
	Path   string
	Key    string // Idempotency-Key, "" if none
	// KeyN is the 1-based count of requests with the same method, path
	// and key (0 when Key is empty).
	KeyN int
}

// Plan picks the fault for a request. It runs under the proxy's lock: keep
// it quick.
type Plan func(Request) Fault

// FirstPerKey applies f to the first n POST requests of every key to path.
func FirstPerKey(path string, f Fault, n int) Plan {
	return func(r Request) Fault {
		if r.Method == http.MethodPost && r.Path == path && r.Key != "" && r.KeyN <= n {
			return f
		}
		return Pass
	}
}

// Always applies f to every request to path with the method.
func Always(method, path string, f Fault) Plan {
	return func(r Request) Fault {
		if r.Method == method && r.Path == path {
			return f
		}
		return Pass
	}
}

// Options configures Start.
type Options struct {
	// Upstream is the server's base URL. Required.
	Upstream string
	// Plan picks faults; nil passes everything.
	Plan Plan
	// Delay is how long Delay holds an answer. Defaults to 2s; capped at
	// 30s, and cut short when the test ends.
	Delay time.Duration
	// RetryAfter, when set, is sent as Retry-After on injected 503s.
	RetryAfter string
}

// Entry is one request the proxy saw.
type Entry struct {
	Request
	Fault Fault
	// Upstream is the server's status, 0 when not forwarded or when the
	// upstream call failed.
	Upstream int
}

// Proxy is a running fault-injecting proxy.
type Proxy struct {
	URL string

	opts     Options
	upstream *http.Client
	srv      *httptest.Server
	done     chan struct{}
	// closeOnce makes Close safe to call twice.
	closeOnce sync.Once

	mu          sync.Mutex
	plan        Plan
	log         []Entry
	perKey      map[string]int
	inflight    map[string]int
	maxInflight map[string]int
}

const maxDelay = 30 * time.Second

// Start starts a proxy; t.Cleanup stops it.
func Start(t testing.TB, o Options) *Proxy {
	t.Helper()
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// New starts a proxy that the caller stops with Close. It needs no
// *testing.T, so tools (the soak of cmd/sendonce-bench) can use it too.
func New(o Options) (*Proxy, error) {
	if o.Upstream == "" {
		return nil, errors.New("faultproxy: Upstream is required")
	}
	if o.Delay <= 0 {
		o.Delay = 2 * time.Second
	}
	o.Delay = min(o.Delay, maxDelay)
	p := &Proxy{
		opts:        o,
		plan:        o.Plan,
		upstream:    &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}},
		done:        make(chan struct{}),
		perKey:      map[string]int{},
		inflight:    map[string]int{},
		maxInflight: map[string]int{},
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p.srv.Listener = ln
	p.srv.Start()
	p.URL = p.srv.URL
	return p, nil
}

// Close stops the proxy: held answers are cut short, connections closed.
func (p *Proxy) Close() {
	p.closeOnce.Do(func() {
		close(p.done)
		p.srv.CloseClientConnections()
		p.srv.Close()
		p.upstream.CloseIdleConnections()
	})
}

// SetPlan replaces the plan for requests from now on.
func (p *Proxy) SetPlan(plan Plan) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plan = plan
}

// Log returns a copy of every request seen so far, in arrival order.
func (p *Proxy) Log() []Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Entry(nil), p.log...)
}

// Count counts logged requests with the method and path whose fault is one
// of faults (any fault when none is given).
func (p *Proxy) Count(method, path string, faults ...Fault) int {
	n := 0
	for _, e := range p.Log() {
		if e.Method != method || e.Path != path {
			continue
		}
		if len(faults) == 0 {
			n++
			continue
		}
		for _, f := range faults {
			if e.Fault == f {
				n++
				break
			}
		}
	}
	return n
}

// MaxInFlight returns the most requests with the same Idempotency-Key that
// were inside the proxy at once, over all keys.
func (p *Proxy) MaxInFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := 0
	for _, n := range p.maxInflight {
		m = max(m, n)
	}
	return m
}

func (p *Proxy) begin(r *http.Request) (Request, Fault, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	req := Request{N: len(p.log) + 1, Method: r.Method, Path: r.URL.Path, Key: r.Header.Get("Idempotency-Key")}
	if req.Key != "" {
		id := req.Method + " " + req.Path + " " + req.Key
		p.perKey[id]++
		req.KeyN = p.perKey[id]
		p.inflight[req.Key]++
		p.maxInflight[req.Key] = max(p.maxInflight[req.Key], p.inflight[req.Key])
	}
	f := Pass
	if p.plan != nil {
		f = p.plan(req)
	}
	p.log = append(p.log, Entry{Request: req, Fault: f})
	return req, f, len(p.log) - 1
}

func (p *Proxy) end(req Request, i, upstream int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if req.Key != "" {
		p.inflight[req.Key]--
	}
	p.log[i].Upstream = upstream
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	req, fault, i := p.begin(r)
	status := 0
	defer func() { p.end(req, i, status) }()

	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		return
	}
	var (
		up     *http.Response
		upBody []byte
	)
	if fault.Forwards() {
		up, upBody, err = p.forward(r, body)
		if err != nil {
			http.Error(w, `{"error":{"code":"bad_gateway","message":"faultproxy: upstream failed"}}`, http.StatusBadGateway)
			return
		}
		status = up.StatusCode
	}
	switch fault {
	case Pass:
		writeResponse(w, up, upBody)
	case Drop:
		hijackClose(w, false)
	case Reset, ResetAfter:
		hijackClose(w, true)
	case Delay:
		t := time.NewTimer(p.opts.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
		case <-p.done:
			return
		}
		writeResponse(w, up, upBody)
	case Unavailable, UnavailableAfter:
		if p.opts.RetryAfter != "" {
			w.Header().Set("Retry-After", p.opts.RetryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"code":"service_unavailable","message":"injected by faultproxy"}}`)
	}
}

func (p *Proxy) forward(r *http.Request, body []byte) (*http.Response, []byte, error) {
	// Not r.Context(): the server must finish the request even when the
	// client has gone, as it would behind a real proxy.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := http.NewRequestWithContext(ctx, r.Method, strings.TrimRight(p.opts.Upstream, "/")+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	for k, vs := range r.Header {
		if strings.EqualFold(k, "Connection") {
			continue
		}
		out.Header[k] = append([]string(nil), vs...)
	}
	resp, err := p.upstream.Do(out)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	return resp, b, nil
}

func writeResponse(w http.ResponseWriter, up *http.Response, body []byte) {
	for k, vs := range up.Header {
		if strings.EqualFold(k, "Content-Length") || strings.EqualFold(k, "Connection") {
			continue
		}
		w.Header()[k] = append([]string(nil), vs...)
	}
	w.WriteHeader(up.StatusCode)
	_, _ = w.Write(body)
}

// hijackClose closes the client's connection without answering; with rst
// the close is a TCP reset (SO_LINGER 0) instead of a FIN.
func hijackClose(w http.ResponseWriter, rst bool) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("faultproxy: response writer cannot hijack")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok && rst {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
