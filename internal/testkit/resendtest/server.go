// Package resendtest is a server on loopback that plays Resend's POST
// /emails as Resend documents it (resend.com/docs/api-reference/emails/send-email
// and …/introduction#idempotency-keys): a Bearer API key, a JSON email, and
// an Idempotency-Key that makes a repeated request answer the first one's
// email instead of making another (a different payload under the same key:
// 409 invalid_idempotent_request). It records every request and every
// email it holds, and can drop its answer after processing a request, or
// refuse it, so that tests can prove that a lost answer never makes a
// second email.
package resendtest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Fault is what the server does with one request.
type Fault int

const (
	Pass Fault = iota
	// Drop processes the request (the email is kept), then closes the
	// connection without answering: the client's answer is lost.
	Drop
	// Hang processes the request, then holds the answer until the test
	// ends or the client gives up.
	Hang
	// TooMany answers 429 rate_limit_exceeded without processing.
	TooMany
	// ServerError processes nothing and answers 500.
	ServerError
	// Hold processes the request (the email is kept), then holds the
	// answer until Release. While it holds, its key is in progress: another
	// request with the same key answers 409 concurrent_idempotent_requests,
	// as Resend does.
	Hold
)

// Request is one request the server saw.
type Request struct {
	N              int
	IdempotencyKey string
	Authorization  string
	Body           []byte
	Fault          Fault
}

// Email is one email the server holds.
type Email struct {
	ID      string
	Key     string
	Payload map[string]any
	Raw     []byte
}

// Server is a running fake.
type Server struct {
	URL  string // http://127.0.0.1:PORT
	Host string // 127.0.0.1:PORT
	Key  string // the API key it accepts

	mu     sync.Mutex
	plan   func(n int) Fault
	reqs   []Request
	emails []Email
	byKey  map[string]int // key -> index in emails
	fp     map[string][32]byte
	// inflight holds the keys of requests not yet answered.
	inflight map[string]bool
	release  chan struct{}
	done     chan struct{}
}

// Start starts a server accepting apiKey; t.Cleanup stops it.
func Start(t testing.TB, apiKey string) *Server {
	t.Helper()
	s := &Server{Key: apiKey, byKey: map[string]int{}, fp: map[string][32]byte{}, inflight: map[string]bool{},
		release: make(chan struct{}), done: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("resendtest: listen: %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	srv.Listener = ln
	srv.Start()
	s.URL, s.Host = srv.URL, ln.Addr().String()
	t.Cleanup(func() {
		close(s.done)
		srv.CloseClientConnections()
		srv.Close()
	})
	return s
}

// SetPlan picks the fault of each request from now on by its number (from
// 1, over all requests); nil passes everything.
func (s *Server) SetPlan(plan func(n int) Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.plan = plan
}

// Release lets every held answer (Hold) go.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.release)
	s.release = make(chan struct{})
}

// Requests returns the requests seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Emails returns the emails held.
func (s *Server) Emails() []Email {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Email(nil), s.emails...)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func errorBody(code int, name, msg string) map[string]any {
	return map[string]any{"statusCode": code, "name": name, "message": msg}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 50<<20))
	s.mu.Lock()
	n := len(s.reqs) + 1
	f := Pass
	if s.plan != nil {
		f = s.plan(n)
	}
	key := r.Header.Get("Idempotency-Key")
	s.reqs = append(s.reqs, Request{N: n, IdempotencyKey: key, Authorization: r.Header.Get("Authorization"), Body: body, Fault: f})
	s.mu.Unlock()

	if !s.admitted(w, r) {
		return
	}
	switch f {
	case TooMany:
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, errorBody(429, "rate_limit_exceeded", "Too many requests."))
		return
	case ServerError:
		writeJSON(w, http.StatusInternalServerError, errorBody(500, "internal_server_error", "Unexpected error."))
		return
	}
	var payload map[string]any
	if err := json.Unmarshal(body, &payload); err != nil {
		writeJSON(w, http.StatusUnprocessableEntity, errorBody(422, "validation_error", "Invalid JSON."))
		return
	}
	if _, ok := payload["to"]; !ok {
		writeJSON(w, http.StatusUnprocessableEntity, errorBody(422, "missing_required_field", "Missing `to` field."))
		return
	}
	if len(key) > 256 {
		writeJSON(w, http.StatusBadRequest, errorBody(400, "invalid_idempotency_key", "The key must be between 1-256 chars."))
		return
	}
	if !s.begin(key) {
		writeJSON(w, http.StatusConflict, errorBody(409, "concurrent_idempotent_requests",
			"Same idempotency key used while original request is still in progress."))
		return
	}
	defer s.end(key)
	id := s.keep(key, body, payload)
	if id == "" {
		writeJSON(w, http.StatusConflict, errorBody(409, "invalid_idempotent_request", "Same idempotency key used with a different request payload."))
		return
	}
	switch f {
	case Drop:
		hijackClose(w)
		return
	case Hold:
		s.mu.Lock()
		release := s.release
		s.mu.Unlock()
		select {
		case <-release:
		case <-s.done:
		case <-time.After(time.Minute):
		}
	case Hang:
		// Processed: the key is no longer in progress, only the answer
		// is lost on the way.
		s.end(key)
		select {
		case <-r.Context().Done():
		case <-s.done:
		case <-time.After(time.Minute):
		}
		hijackClose(w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": id})
}

// admitted answers what Resend answers a request to another route or
// without the key, and reports whether the request goes on.
func (s *Server) admitted(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/emails":
		writeJSON(w, http.StatusNotFound, errorBody(404, "not_found", "Route not found"))
	case r.Header.Get("Authorization") == "":
		writeJSON(w, http.StatusUnauthorized, errorBody(401, "missing_api_key", "Missing API key in the authorization header."))
	case r.Header.Get("Authorization") != "Bearer "+s.Key:
		writeJSON(w, http.StatusForbidden, errorBody(403, "invalid_api_key", "API key is invalid"))
	default:
		return true
	}
	return false
}

// begin marks key in progress; false if a request with it already is.
func (s *Server) begin(key string) bool {
	if key == "" {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight[key] {
		return false
	}
	s.inflight[key] = true
	return true
}

func (s *Server) end(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.inflight, key)
}

// keep stores the email unless its key has one: it returns the key's
// email's id, or "" when the key's payload differs.
func (s *Server) keep(key string, body []byte, payload map[string]any) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := sha256.Sum256(body)
	if key != "" {
		if i, ok := s.byKey[key]; ok {
			if s.fp[key] != sum {
				return ""
			}
			return s.emails[i].ID
		}
	}
	id := fmt.Sprintf("4ef9a417-02e9-4d39-ad75-%012d", len(s.emails)+1)
	s.emails = append(s.emails, Email{ID: id, Key: key, Payload: payload, Raw: body})
	if key != "" {
		s.byKey[key], s.fp[key] = len(s.emails)-1, sum
	}
	return id
}

func hijackClose(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

var faultNames = [...]string{"pass", "drop", "hang", "too-many", "server-error", "hold"}

func (f Fault) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return "fault?"
}
