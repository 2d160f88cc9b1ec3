package idempotency

import (
	"net/http"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	done := func(fp string, expires time.Time) *Record {
		return &Record{Fingerprint: fp, State: StateCompleted, ExpiresAt: expires, Response: &Response{Status: 200}}
	}
	held := func(fp string, until time.Time) *Record {
		return &Record{Fingerprint: fp, State: StateInFlight, LockedUntil: until}
	}
	for _, c := range []struct {
		name string
		rec  *Record
		fp   string
		want Outcome
	}{
		{"no record", nil, "a", Proceed},
		{"completed, same body", done("a", now.Add(time.Hour)), "a", Replay},
		{"completed, other body", done("a", now.Add(time.Hour)), "b", Mismatch},
		{"completed, past its TTL", done("a", now), "b", Proceed},
		{"in flight, same body", held("a", now.Add(time.Second)), "a", InUse},
		{"in flight, other body", held("a", now.Add(time.Second)), "b", Mismatch},
		{"in flight, lease ran out", held("a", now), "a", Proceed},
	} {
		if got := Decide(c.rec, c.fp, now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestShouldStore(t *testing.T) {
	for status, want := range map[int]bool{
		200: true, 201: true, 204: true, 400: true, 404: true, 422: true,
		http.StatusUnauthorized: false, http.StatusForbidden: false, http.StatusConflict: false,
		499:                              false, // the client left: nothing final was answered (a batch cut short must not store its part)
		http.StatusRequestEntityTooLarge: false, http.StatusTooManyRequests: false,
		500: false, 502: false, 503: false, 302: false,
	} {
		if got := ShouldStore(status); got != want {
			t.Errorf("ShouldStore(%d) = %v, want %v", status, got, want)
		}
	}
}

func TestNewToken_Unique(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		tok := NewToken()
		if len(tok) != 32 || seen[tok] {
			t.Fatalf("token %q repeated or malformed", tok)
		}
		seen[tok] = true
	}
}

// A record is expired from the instant Decide stops honouring it.
func TestRecord_Expired(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		name string
		rec  Record
		want bool
	}{
		{"completed, before its TTL", Record{State: StateCompleted, ExpiresAt: now.Add(time.Nanosecond)}, false},
		{"completed, at its TTL", Record{State: StateCompleted, ExpiresAt: now}, true},
		{"completed, lease long past", Record{State: StateCompleted, LockedUntil: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour)}, false},
		{"in flight, within its lease", Record{State: StateInFlight, LockedUntil: now.Add(time.Nanosecond)}, false},
		{"in flight, at its lease", Record{State: StateInFlight, LockedUntil: now}, true},
	} {
		rec := c.rec
		rec.Fingerprint = "a"
		if got := rec.Expired(now); got != c.want {
			t.Errorf("%s: Expired = %v, want %v", c.name, got, c.want)
		}
		if got := Decide(&rec, "a", now) == Proceed; got != c.want {
			t.Errorf("%s: Decide proceeds = %v, want %v", c.name, got, c.want)
		}
	}
}
