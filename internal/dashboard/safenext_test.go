package dashboard_test

import (
	"testing"

	"github.com/sendonce/sendonce/internal/dashboard"
)

// TestSafeNext_StaysOnThisSite: the redirect after sign-in never leaves
// the site, however a browser reads it: tabs and newlines (which browsers
// drop, so "/\t/evil.example" is "//evil.example"), backslashes (read as
// slashes), schemes and hosts all fall back to "/".
func TestSafeNext_StaysOnThisSite(t *testing.T) {
	for next, want := range map[string]string{
		"/ui/sends?status=queued": "/ui/sends?status=queued",
		"/":                       "/",
		"/\t/evil.example/x":      "/",
		"/\n/evil.example/x":      "/",
		"/\r/evil.example":        "/",
		"/ /evil.example":         "/",
		"//evil.example":          "/",
		"/\\evil.example":         "/",
		"\\/evil.example":         "/",
		"https://evil.example":    "/",
		"evil.example":            "/",
		"/\u00a0/evil.example":    "/",
		"/\x7f/evil.example":      "/",
		"":                        "/",
	} {
		if got := dashboard.SafeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}
