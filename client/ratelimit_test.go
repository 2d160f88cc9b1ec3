package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sendonce/sendonce/client"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// A 429 from the per-key limit reaches the caller as CodeRateLimited with
// the server's Retry-After when that does not fit in MaxElapsed; when it
// fits, the client waits exactly that long and the retry, in the next
// window, sends (the 429 was not stored under the key).
func TestClient_SurfacesTheRateLimitsRetryAfter(t *testing.T) {
	const window = 10 * time.Second
	clock := &sendoncetest.Clock{}
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true, Clock: clock, RateLimit: 1, RateLimitWindow: window})
	// Windows start at multiples of their length: start one, so the test
	// (well under 10 s of wall time) stays inside it.
	now := clock.Now()
	clock.Advance(now.Truncate(window).Add(window).Sub(now))
	var sleeps []time.Duration // the client's calls are sequential
	wait := func(_ context.Context, d time.Duration) error {
		sleeps = append(sleeps, d)
		clock.Advance(d)
		return nil
	}
	impatient := newClient(t, env.URL, env.AdminKey, func(cfg *client.Config) { cfg.MaxElapsed, cfg.Sleep = 5*time.Second, wait })
	patient := newClient(t, env.URL, env.AdminKey, func(cfg *client.Config) { cfg.Sleep = wait })

	req := &client.SendRequest{To: []string{"ann@example.com"}, Subject: "hi", Text: "hello"}
	if _, err := impatient.Send(ctxT(t), req, &client.SendOptions{IdempotencyKey: "rl-a"}); err != nil {
		t.Fatalf("first send: %v", err)
	}
	_, err := impatient.Send(ctxT(t), req, &client.SendOptions{IdempotencyKey: "rl-b"})
	var e *client.Error
	if !errors.As(err, &e) || e.Code != client.CodeRateLimited || e.Status != 429 {
		t.Fatalf("second send: %v, want 429 %s", err, client.CodeRateLimited)
	}
	if e.RetryAfter < window-2*time.Second || e.RetryAfter > window {
		t.Fatalf("RetryAfter %v, want about the window's %v", e.RetryAfter, window)
	}
	if len(sleeps) != 0 {
		t.Fatalf("the impatient client slept %v for a Retry-After past its MaxElapsed", sleeps)
	}

	s, err := patient.Send(ctxT(t), req, &client.SendOptions{IdempotencyKey: "rl-b"})
	if err != nil || s.IdempotencyKey != "rl-b" {
		t.Fatalf("the patient client's send: %v", err)
	}
	if len(sleeps) != 1 || sleeps[0] != e.RetryAfter {
		t.Fatalf("the patient client slept %v, want once the Retry-After %v", sleeps, e.RetryAfter)
	}
}
