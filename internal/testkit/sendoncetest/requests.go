package sendoncetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
)

// The instance's API, called as a client would: requests, their answers,
// sends and the wait for a send's status.

// Response is a finished HTTP exchange.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map.
func (r *Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("response is not a JSON object: %v: %s", err, r.Body)
	}
	return m
}

// TryJSON is JSON for goroutines: it returns the error instead of failing.
func (r *Response) TryJSON() (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		return nil, fmt.Errorf("response is not a JSON object: %w: %s", err, r.Body)
	}
	return m, nil
}

// ErrorCode returns error.code of an error body, "" otherwise.
func (r *Response) ErrorCode() string {
	var b struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return b.Error.Code
}

// Request is one API call.
type Request struct {
	Method, Path string
	Key          string            // bearer secret; "" for none
	IdemKey      string            // Idempotency-Key; "" for none
	Body         any               // []byte, string, or a value to marshal; nil for none
	Header       map[string]string // extra headers
}

// Do performs r against the instance.
func (e *Env) Do(t testing.TB, r Request) *Response {
	t.Helper()
	resp, err := e.TryDo(r)
	if err != nil {
		t.Fatalf("%s %s: %v", r.Method, r.Path, err)
	}
	return resp
}

// TryDo is Do for goroutines: it returns the error instead of failing.
func (e *Env) TryDo(r Request) (*Response, error) {
	var body io.Reader
	switch b := r.Body.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(b)
	case string:
		body = bytes.NewReader([]byte(b))
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(j)
	}
	req, err := http.NewRequest(r.Method, e.URL+r.Path, body)
	if err != nil {
		return nil, err
	}
	if r.Key != "" {
		req.Header.Set("Authorization", "Bearer "+r.Key)
	}
	if r.IdemKey != "" {
		req.Header.Set("Idempotency-Key", r.IdemKey)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// Send posts to /v1/send with the admin key.
func (e *Env) Send(t testing.TB, idemKey string, body any) *Response {
	t.Helper()
	return e.Do(t, Request{Method: "POST", Path: "/v1/send", Key: e.AdminKey, IdemKey: idemKey, Body: body})
}

// TrySend is Send for goroutines: it returns an error instead of failing,
// also for any answer but 200, and the send's id.
func (e *Env) TrySend(idemKey string, body any) (string, error) {
	return e.trySendAs(e.AdminKey, idemKey, body)
}

// TrySendAs is TrySend with another API key.
func (e *Env) TrySendAs(key, idemKey string, body any) (string, error) {
	return e.trySendAs(key, idemKey, body)
}

func (e *Env) trySendAs(key, idemKey string, body any) (string, error) {
	r, err := e.TryDo(Request{Method: "POST", Path: "/v1/send", Key: key, IdemKey: idemKey, Body: body})
	if err != nil {
		return "", err
	}
	if r.Status != http.StatusOK {
		return "", fmt.Errorf("send %s: %d %s", idemKey, r.Status, r.Body)
	}
	m, err := r.TryJSON()
	if err != nil {
		return "", err
	}
	id, _ := m["id"].(string)
	return id, nil
}

// Mail is a minimal valid send body.
func Mail(to, subject string) map[string]any {
	return map[string]any{"to": to, "subject": subject, "text": "Hello from a test."}
}

// WaitStatus polls the send until it has one of the statuses (or fails the
// test after timeout) and returns its last JSON.
func (e *Env) WaitStatus(t testing.TB, id string, timeout time.Duration, want ...core.Status) map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last map[string]any
	for time.Now().Before(deadline) {
		r := e.Do(t, Request{Method: "GET", Path: "/v1/sends/" + id, Key: e.AdminKey})
		if r.Status != http.StatusOK {
			t.Fatalf("GET send %s: %d %s", id, r.Status, r.Body)
		}
		last = r.JSON(t)
		for _, w := range want {
			if last["status"] == string(w) {
				return last
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("send %s: status %v after %v, want one of %v", id, last["status"], timeout, want)
	return nil
}
