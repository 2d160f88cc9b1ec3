package main

import (
	"bytes"
	"strings"
	"testing"
)

// A 500 is a violation of the soak, however the rest went: a database out
// of reach is a 503 with Retry-After, so a 500 means the server failed.
// 503, 409 and 429 are answers a retrying client expects.
func TestSoakReport_A500IsAViolation(t *testing.T) {
	for _, tc := range []struct {
		requests map[string]int
		want     int
	}{
		{map[string]int{"200": 10, "503": 4, "409": 2, "429": 1, "no-answer": 3}, 0},
		{map[string]int{"200": 10, "500": 1}, 1},
		{map[string]int{"200": 10, "500": 2, "502": 1, "503": 7}, 3},
	} {
		rep := &soakReport{Requests: tc.requests}
		rep.countServerErrors()
		if rep.ServerErrors != tc.want || rep.violations() != tc.want {
			t.Errorf("%v: %d server errors, %d violations, want %d", tc.requests, rep.ServerErrors, rep.violations(), tc.want)
		}
		var out bytes.Buffer
		err := reportSoak(soakConfig{}, rep, "", &out)
		if tc.want > 0 && (err == nil || !strings.Contains(out.String(), "server-errors=")) {
			t.Errorf("%v: the soak passed (%v) with 5xx answers:\n%s", tc.requests, err, out.String())
		}
	}
}
