package httpapi_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// limitedEnv starts an instance limiting every key to n requests an hour,
// its clock moved to the start of a window so that no test's requests
// straddle two windows (windows start at multiples of their length).
func limitedEnv(t *testing.T, o sendoncetest.Options, n int) *sendoncetest.Env {
	t.Helper()
	if o.Clock == nil {
		o.Clock = &sendoncetest.Clock{}
	}
	o.RateLimit, o.RateLimitWindow = n, time.Hour
	env := sendoncetest.Start(t, o)
	now := o.Clock.Now()
	o.Clock.Advance(now.Truncate(time.Hour).Add(time.Hour + time.Second).Sub(now))
	return env
}

func get(t *testing.T, env *sendoncetest.Env, key, path string) *sendoncetest.Response {
	t.Helper()
	return env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: path, Key: key})
}

// wantRateHeaders checks the three RateLimit fields; reset is within a
// few seconds of want (the wall clock runs during the test).
func wantRateHeaders(t *testing.T, r *sendoncetest.Response, limit, remaining int, reset time.Duration) {
	t.Helper()
	if got := r.Header.Get("RateLimit-Limit"); got != strconv.Itoa(limit) {
		t.Fatalf("RateLimit-Limit %q, want %d (status %d)", got, limit, r.Status)
	}
	if got := r.Header.Get("RateLimit-Remaining"); got != strconv.Itoa(remaining) {
		t.Fatalf("RateLimit-Remaining %q, want %d (status %d)", got, remaining, r.Status)
	}
	s, err := strconv.Atoi(r.Header.Get("RateLimit-Reset"))
	if err != nil || time.Duration(s)*time.Second > reset || time.Duration(s)*time.Second < reset-10*time.Second {
		t.Fatalf("RateLimit-Reset %q, want about %v", r.Header.Get("RateLimit-Reset"), reset)
	}
}

func TestRateLimit_429WithHeadersAfterNRequestsUntilTheWindowEnds(t *testing.T) {
	env := limitedEnv(t, sendoncetest.Options{}, 3)
	for i := 1; i <= 3; i++ {
		r := get(t, env, env.AdminKey, "/v1/sends")
		if r.Status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
		}
		wantRateHeaders(t, r, 3, 3-i, time.Hour-time.Second)
	}
	// Past the limit, on any route of the key: a send is refused before
	// its body is read, and the refusal is not stored under its key.
	body := mail(t, "ann@example.com", "limited")
	r := post(t, env, env.AdminKey, "rl-1", body)
	if r.Status != http.StatusTooManyRequests || r.ErrorCode() != core.CodeRateLimited {
		t.Fatalf("4th request: %d %s, want 429 rate_limited", r.Status, r.Body)
	}
	wantRateHeaders(t, r, 3, 0, time.Hour-time.Second)
	if r.Header.Get("Retry-After") != r.Header.Get("RateLimit-Reset") {
		t.Fatalf("Retry-After %q, want RateLimit-Reset %q", r.Header.Get("Retry-After"), r.Header.Get("RateLimit-Reset"))
	}
	if n := env.QueryInt(t, `SELECT count(*) FROM `+sendoncetest.IdempotencyRecords+` r WHERE key = ?`, "rl-1"); n != 0 {
		t.Fatalf("the 429 was stored under its Idempotency-Key (%d rows)", n)
	}

	env.Clock.Advance(time.Hour) // the next window
	r = post(t, env, env.AdminKey, "rl-1", body)
	requireOriginal(t, r, http.StatusOK)
	wantRateHeaders(t, r, 3, 2, time.Hour)
}

// Every key has its own count; a key's own limit overrides the server's,
// and a negative one (the CLI's --rate-limit -1) lifts it.
func TestRateLimit_PerKeyCountsAndOverrides(t *testing.T) {
	env := limitedEnv(t, sendoncetest.Options{}, 2)
	scopes := []core.Scope{core.ScopeRead}
	_, other := env.NewKey(t, app.NewKeyParams{Name: "other", Scopes: scopes})
	_, strict := env.NewKey(t, app.NewKeyParams{Name: "strict", Scopes: scopes, RateLimit: 1})
	_, free := env.NewKey(t, app.NewKeyParams{Name: "free", Scopes: scopes, RateLimit: -1})
	for range 2 {
		get(t, env, env.AdminKey, "/v1/sends")
	}
	if r := get(t, env, env.AdminKey, "/v1/sends"); r.Status != http.StatusTooManyRequests {
		t.Fatalf("admin key past its limit: %d", r.Status)
	}
	if r := get(t, env, other, "/v1/sends"); r.Status != http.StatusOK {
		t.Fatalf("another key after the admin key's limit: %d %s", r.Status, r.Body)
	} else {
		wantRateHeaders(t, r, 2, 1, time.Hour-time.Second)
	}
	if r := get(t, env, strict, "/v1/sends"); r.Status != http.StatusOK {
		t.Fatalf("strict key, 1st: %d", r.Status)
	}
	if r := get(t, env, strict, "/v1/sends"); r.Status != http.StatusTooManyRequests {
		t.Fatalf("strict key (limit 1), 2nd: %d, want 429", r.Status)
	}
	for i := range 5 {
		r := get(t, env, free, "/v1/sends")
		if r.Status != http.StatusOK || r.Header.Get("RateLimit-Limit") != "" {
			t.Fatalf("unlimited key, request %d: %d with RateLimit-Limit %q", i+1, r.Status, r.Header.Get("RateLimit-Limit"))
		}
	}
	// A 403 for a missing scope is answered after the count, with the
	// headers: the request still cost its key lookup.
	if r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/send", Key: other, IdemKey: "x", Body: mail(t, "a@example.com", "x")}); r.Status != http.StatusForbidden {
		t.Fatalf("read key sending: %d", r.Status)
	} else {
		wantRateHeaders(t, r, 2, 0, time.Hour-time.Second)
	}
}

// The Resend routes count too and answer Resend's 429 name; a key created
// through POST /api-keys may be given a lower limit, never a higher one.
func TestRateLimit_ResendRoutesAndKeyCreation(t *testing.T) {
	env := limitedEnv(t, sendoncetest.Options{}, 4)
	do := func(method, path, key string, body any) *sendoncetest.Response {
		return env.Do(t, sendoncetest.Request{Method: method, Path: path, Key: key, Body: body})
	}
	if r := do(http.MethodPost, "/api-keys", env.AdminKey, map[string]any{"name": "high", "rate_limit": 5}); r.Status != http.StatusForbidden {
		t.Fatalf("a key above the creator's limit: %d %s, want 403", r.Status, r.Body)
	}
	if r := do(http.MethodPost, "/api-keys", env.AdminKey, map[string]any{"name": "none", "rate_limit": -1}); r.Status != http.StatusForbidden {
		t.Fatalf("an unlimited key through the API: %d %s, want 403", r.Status, r.Body)
	}
	r := do(http.MethodPost, "/api-keys", env.AdminKey, map[string]any{"name": "low", "rate_limit": 1})
	if r.Status != http.StatusOK {
		t.Fatalf("a key below the creator's limit: %d %s", r.Status, r.Body)
	}
	low := r.JSON(t)["token"].(string)
	if r := do(http.MethodGet, "/domains", low, nil); r.Status != http.StatusOK {
		t.Fatalf("low key, 1st: %d %s", r.Status, r.Body)
	}
	r = do(http.MethodGet, "/domains", low, nil)
	if r.Status != http.StatusTooManyRequests || r.JSON(t)["name"] != "rate_limit_exceeded" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("low key, 2nd: %d %s (Retry-After %q), want Resend's 429", r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	wantRateHeaders(t, r, 1, 0, time.Hour-time.Second)
}

// Two API processes on one Redis share one limit per key; with the limit
// counted in each process, a client spread over both gets twice as much.
func TestRateLimit_SharedThroughRedisAcrossTwoInstances(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		clock := &sendoncetest.Clock{}
		a := limitedEnv(t, sendoncetest.Options{Backend: backend, Redis: true, Clock: clock, NoWorkers: true}, 3)
		b := limitedEnv(t, sendoncetest.Options{DB: a.DB, Redis: true, RedisPrefix: a.RedisPrefix, Clock: clock, NoWorkers: true}, 3)
		statuses := []int{
			get(t, a, a.AdminKey, "/v1/sends").Status,
			get(t, b, a.AdminKey, "/v1/sends").Status,
			get(t, a, a.AdminKey, "/v1/sends").Status,
			get(t, b, a.AdminKey, "/v1/sends").Status,
		}
		want := []int{200, 200, 200, 429}
		for i := range want {
			if statuses[i] != want[i] {
				t.Fatalf("statuses across two instances %v, want %v", statuses, want)
			}
		}
	})
}
