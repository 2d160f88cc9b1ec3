package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"
)

// fakeAPI answers from a script, one entry per request, and records what it
// got. Past the end of the script it answers 200 with a send.
type fakeAPI struct {
	t      *testing.T
	mu     sync.Mutex
	script []func(w http.ResponseWriter)
	keys   []string
	bodies []string
	srv    *httptest.Server
}

const okSend = `{"id":"snd_1","object":"send","status":"queued","idempotency_key":"k","to":["a@example.com"],"template_id":null,"last_error":null,"sent_at":null,"created_at":"2026-01-02T03:04:05.123456Z","updated_at":"2026-01-02T03:04:05Z"}`

func newFakeAPI(t *testing.T, script ...func(w http.ResponseWriter)) *fakeAPI {
	f := &fakeAPI{t: t, script: script}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		n := len(f.keys)
		f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
		f.bodies = append(f.bodies, string(b))
		f.mu.Unlock()
		if n < len(f.script) {
			f.script[n](w)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, okSend)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) requests() ([]string, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.keys...), append([]string(nil), f.bodies...)
}

func answer(status int, retryAfter, body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func hangUp(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

// fakeClock is a clock that only sleeping moves.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return ctx.Err()
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

func testClient(t *testing.T, url string, mod func(*Config)) (*Client, *fakeClock) {
	t.Helper()
	clk := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := Config{BaseURL: url, APIKey: "so_test", Timeout: 2 * time.Second, MaxAttempts: 5,
		BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, Now: clk.Now, Sleep: clk.Sleep}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, clk
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

var mail = &SendRequest{To: []string{"a@example.com"}, Subject: "Hi", Text: "Hello"}

func TestSend_RetriesTransientErrorsWithTheSameKey(t *testing.T) {
	f := newFakeAPI(t,
		answer(503, "", `{"error":{"code":"internal_error","message":"x"}}`),
		hangUp,
		answer(409, "1", `{"error":{"code":"idempotency_key_in_use","message":"busy","param":"Idempotency-Key"}}`),
		answer(502, "", `<html>bad gateway</html>`),
	)
	c, _ := testClient(t, f.srv.URL, nil)
	s, err := c.Send(context.Background(), mail, nil)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	keys, bodies := f.requests()
	if len(keys) != 5 {
		t.Fatalf("%d requests, want 5", len(keys))
	}
	for i := range keys {
		if keys[i] != keys[0] || bodies[i] != bodies[0] {
			t.Fatalf("attempt %d sent key %q body %q; attempt 1 sent %q %q", i+1, keys[i], bodies[i], keys[0], bodies[0])
		}
	}
	if !uuidV4.MatchString(keys[0]) {
		t.Errorf("generated key %q is not a UUID v4", keys[0])
	}
	if s.ID != "snd_1" || s.Status != StatusQueued || s.SentAt != nil || s.TemplateID != "" || s.CreatedAt.Nanosecond() != 123456000 {
		t.Errorf("decoded send: %+v", s)
	}
}

func TestSend_OneKeyPerLogicalCallNeverPerAttempt(t *testing.T) {
	f := newFakeAPI(t, answer(500, "", `{"error":{"code":"internal_error","message":"x"}}`))
	c, _ := testClient(t, f.srv.URL, nil)
	for range 2 {
		if _, err := c.Send(context.Background(), mail, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Send(context.Background(), mail, &SendOptions{IdempotencyKey: "welcome-user-42"}); err != nil {
		t.Fatal(err)
	}
	keys, _ := f.requests()
	// Call 1: a 500 then a success, same key; call 2: a new key; call 3: the caller's.
	if len(keys) != 4 || keys[0] != keys[1] || keys[2] == keys[0] || keys[3] != "welcome-user-42" {
		t.Fatalf("keys per request: %q", keys)
	}
}

func TestSend_NeverRetriesAFinal4xx(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		code   string
	}{
		{422, `{"error":{"code":"validation_error","message":"to is required","param":"to"}}`, CodeValidation},
		{422, `{"error":{"code":"idempotency_key_reused","message":"other body","param":"Idempotency-Key"}}`, CodeKeyReused},
		{400, `{"error":{"code":"idempotency_key_invalid","message":"bad"}}`, CodeKeyInvalid},
		{401, `{"error":{"code":"unauthorized","message":"no"}}`, CodeUnauthorized},
		{403, `{"error":{"code":"forbidden","message":"no"}}`, CodeForbidden},
		{409, `{"error":{"code":"invalid_state","message":"no"}}`, CodeInvalidState},
		{413, `{"error":{"code":"payload_too_large","message":"big"}}`, CodePayloadTooLarge},
	} {
		t.Run(tc.code, func(t *testing.T) {
			f := newFakeAPI(t, answer(tc.status, "", tc.body))
			c, clk := testClient(t, f.srv.URL, nil)
			_, err := c.Send(context.Background(), mail, &SendOptions{IdempotencyKey: "k1"})
			var e *Error
			if !errors.As(err, &e) || e.Status != tc.status || e.Code != tc.code {
				t.Fatalf("err = %v; want *Error %d %s", err, tc.status, tc.code)
			}
			if keys, _ := f.requests(); len(keys) != 1 || len(clk.Sleeps()) != 0 {
				t.Fatalf("%d requests, %d sleeps; want 1 and 0", len(keys), len(clk.Sleeps()))
			}
			if IsRetryable(err) || !IsRejected(err) || IsOutcomeUnknown(err) || IdempotencyKeyOf(err) != "k1" {
				t.Errorf("classification of %v: retryable %v rejected %v unknown %v key %q", err,
					IsRetryable(err), IsRejected(err), IsOutcomeUnknown(err), IdempotencyKeyOf(err))
			}
		})
	}
}

// Full jitter: each wait is drawn anew from [0, min(MaxDelay, BaseDelay·2^(n−1))].
// Bounds alone would pass a zero (or a fixed) backoff, so the test makes
// many calls and checks that the waits of each retry spread over their
// whole range: none above its cap, some in its upper half and some in its
// lower quarter, and a mean near half the cap (a uniform draw's).
func TestSend_BackoffIsFullJitterAndBounded(t *testing.T) {
	const calls, attempts = 40, 6
	f := newFakeAPI(t)
	f.script = make([]func(http.ResponseWriter), calls*attempts)
	for i := range f.script {
		f.script[i] = answer(503, "", `{"error":{"code":"internal_error","message":"x"}}`)
	}
	c, clk := testClient(t, f.srv.URL, func(c *Config) { c.MaxAttempts = attempts; c.MaxElapsed = time.Hour })
	for call := range calls {
		_, err := c.Send(context.Background(), mail, nil)
		var ce *CallError
		if !errors.As(err, &ce) || ce.Attempts != attempts || !IsOutcomeUnknown(err) || !IsRetryable(err) {
			t.Fatalf("err = %v; want a CallError after %d attempts, outcome unknown", err, attempts)
		}
		keys, _ := f.requests()
		if len(keys) != (call+1)*attempts || IdempotencyKeyOf(err) != keys[call*attempts] {
			t.Fatalf("%d requests, key %q in error, %q sent", len(keys), IdempotencyKeyOf(err), keys[call*attempts])
		}
	}
	sleeps := clk.Sleeps()
	if len(sleeps) != calls*(attempts-1) {
		t.Fatalf("%d sleeps, want %d", len(sleeps), calls*(attempts-1))
	}
	var sum float64 // of wait/cap over every wait
	for retry := range attempts - 1 {
		limit := min(time.Second, 100*time.Millisecond<<retry)
		lo, hi := limit, time.Duration(0)
		for call := range calls {
			d := sleeps[call*(attempts-1)+retry]
			if d < 0 || d > limit {
				t.Fatalf("call %d, sleep %d = %v, want within [0, %v]", call+1, retry+1, d, limit)
			}
			lo, hi = min(lo, d), max(hi, d)
			sum += float64(d) / float64(limit)
		}
		// Each fails for a uniform draw with probability 2^-40 or 4^-40.
		if hi <= limit/2 || lo >= limit/4 {
			t.Errorf("sleep %d ranged over [%v, %v] in %d calls; full jitter spreads it over [0, %v]", retry+1, lo, hi, calls, limit)
		}
	}
	// The mean of 200 uniform draws on [0, 1] has a standard deviation
	// of 0.02: 0.35–0.65 is seven of them either side.
	if mean := sum / float64(len(sleeps)); mean < 0.35 || mean > 0.65 {
		t.Errorf("mean wait is %.2f of its cap, want about 0.5 (uniform)", mean)
	}
}

func TestSend_HonoursRetryAfter(t *testing.T) {
	date := time.Date(2026, 1, 1, 0, 0, 3, 0, time.UTC).Format(http.TimeFormat)
	f := newFakeAPI(t,
		answer(409, "1", `{"error":{"code":"idempotency_key_in_use","message":"busy"}}`),
		answer(429, "2", `{"error":{"code":"rate_limited","message":"slow down"}}`),
		answer(503, date, `{"error":{"code":"unavailable","message":"x"}}`),
	)
	c, clk := testClient(t, f.srv.URL, func(c *Config) { c.MaxDelay = 10 * time.Millisecond; c.BaseDelay = time.Millisecond })
	if _, err := c.Send(context.Background(), mail, nil); err != nil {
		t.Fatal(err)
	}
	sleeps := clk.Sleeps()
	// Retry-After: 1 s, then 2 s, then an HTTP date 3 s after the start (0 + 1 + 2 slept: 0 left, so the jitter).
	if len(sleeps) != 3 || sleeps[0] != time.Second || sleeps[1] != 2*time.Second || sleeps[2] > 10*time.Millisecond {
		t.Fatalf("sleeps = %v; want [1s 2s ≤10ms]", sleeps)
	}
}

func TestSend_StopsAtMaxElapsed(t *testing.T) {
	f := newFakeAPI(t, answer(503, "120", `{"error":{"code":"unavailable","message":"x"}}`))
	c, clk := testClient(t, f.srv.URL, func(c *Config) { c.MaxElapsed = time.Minute })
	_, err := c.Send(context.Background(), mail, nil)
	var e *Error
	if !errors.As(err, &e) || e.Status != 503 || e.RetryAfter != 2*time.Minute {
		t.Fatalf("err = %v; want the 503 with its Retry-After", err)
	}
	if keys, _ := f.requests(); len(keys) != 1 || len(clk.Sleeps()) != 0 {
		t.Fatalf("%d requests and sleeps %v: a Retry-After beyond MaxElapsed must end the call", len(keys), clk.Sleeps())
	}
}

func TestSend_TimeoutPerAttemptIsRetried(t *testing.T) {
	block := make(chan struct{})
	slow := func(w http.ResponseWriter) {
		select {
		case <-block:
		case <-time.After(5 * time.Second):
		}
	}
	f := newFakeAPI(t, slow, slow)
	t.Cleanup(func() { close(block) }) // before the server's Close, which waits for handlers
	c, _ := testClient(t, f.srv.URL, func(c *Config) { c.Timeout = 100 * time.Millisecond })
	s, err := c.Send(context.Background(), mail, &SendOptions{IdempotencyKey: "slow-1"})
	if err != nil || s.ID != "snd_1" {
		t.Fatalf("Send = %v, %v", s, err)
	}
	if keys, _ := f.requests(); len(keys) != 3 || keys[2] != "slow-1" {
		t.Fatalf("requests %q, want three with slow-1", keys)
	}
}

func TestSend_CancelledContextIsNotRetried(t *testing.T) {
	f := newFakeAPI(t, answer(503, "", `{"error":{"code":"x","message":"x"}}`))
	ctx, cancel := context.WithCancel(context.Background())
	c, _ := testClient(t, f.srv.URL, func(c *Config) {
		c.Sleep = func(ctx context.Context, d time.Duration) error { cancel(); return ctx.Err() }
	})
	_, err := c.Send(ctx, mail, nil)
	if !errors.Is(err, context.Canceled) || !IsOutcomeUnknown(err) || IsRetryable(err) {
		t.Fatalf("err = %v; want context.Canceled, outcome unknown, not retryable", err)
	}
	if keys, _ := f.requests(); len(keys) != 1 {
		t.Fatalf("%d requests, want 1", len(keys))
	}
}

func TestSend_RefusesBadKeysBeforeSending(t *testing.T) {
	f := newFakeAPI(t)
	c, _ := testClient(t, f.srv.URL, nil)
	long := make([]byte, 256)
	for i := range long {
		long[i] = 'a'
	}
	for _, k := range []string{"has space", `"quoted"`, string(long), "tab\t", "é"} {
		_, err := c.Send(context.Background(), mail, &SendOptions{IdempotencyKey: k})
		if !errors.Is(err, ErrInvalidRequest) || IsRetryable(err) || IsOutcomeUnknown(err) {
			t.Errorf("key %q: err = %v, want ErrInvalidRequest", k, err)
		}
	}
	if keys, _ := f.requests(); len(keys) != 0 {
		t.Fatalf("%d requests sent for bad keys", len(keys))
	}
}

func TestNew_Validates(t *testing.T) {
	for _, cfg := range []Config{{}, {BaseURL: "http://x"}, {BaseURL: "ftp://x", APIKey: "k"}, {BaseURL: "127.0.0.1:8787", APIKey: "k"}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"": 0, "0": 0, "3": 3 * time.Second, "-1": 0, "soon": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):       0,
	} {
		if got := retryAfter(in, now); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}
