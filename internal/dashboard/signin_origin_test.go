package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestDashboard_SignInFromAnotherSiteRefused: another site's form cannot
// sign a browser in with the attacker's key (login CSRF), even with a
// valid sign-in token and cookie: a cross-origin Origin, "Origin: null" or
// a cross-origin Referer is 403 and starts no session. The same form from
// this site signs in; so do the other forms' checks, which share it.
func TestDashboard_SignInFromAnotherSiteRefused(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true})
	post := func(br *browser, path string, form url.Values, header, value string) *http.Response {
		t.Helper()
		form.Set("csrf", br.csrf)
		req, err := http.NewRequest("POST", env.URL+path, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if header != "" {
			req.Header.Set(header, value)
		}
		res, err := br.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	for _, c := range []struct{ header, value string }{
		{"Origin", "https://evil.example"},
		{"Origin", "null"},
		{"Referer", "https://evil.example/login-csrf"},
		{"Origin", "http://" + strings.TrimPrefix(env.URL, "http://") + ".evil.example"},
	} {
		br := newBrowser(t, env)
		br.get("/ui/signin")
		res := post(br, "/ui/signin", url.Values{"key": {env.AdminKey}}, c.header, c.value)
		if res.StatusCode != http.StatusForbidden || cookieOf(res, "sendonce_session") != nil {
			t.Errorf("sign-in with %s: %s: %d, session cookie %v; want 403 and none", c.header, c.value, res.StatusCode, cookieOf(res, "sendonce_session") != nil)
		}
	}
	for _, c := range []struct{ header, value string }{{"Origin", env.URL}, {"Referer", env.URL + "/ui/signin"}, {"", ""}} {
		br := newBrowser(t, env)
		br.get("/ui/signin")
		if res := post(br, "/ui/signin", url.Values{"key": {env.AdminKey}}, c.header, c.value); res.StatusCode != http.StatusSeeOther || cookieOf(res, "sendonce_session") == nil {
			t.Errorf("sign-in with %s: %s: %d; want 303 and a session", c.header, c.value, res.StatusCode)
		}
	}
	// A signed-in form posted with another site's Referer is refused too.
	br := newBrowser(t, env)
	br.signIn(env.AdminKey)
	br.get("/ui/keys")
	if res := post(br, "/ui/keys", url.Values{"name": {"x"}, "scope": {"read"}}, "Referer", "https://evil.example/"); res.StatusCode != http.StatusForbidden {
		t.Errorf("a key form with another site's Referer: %d, want 403", res.StatusCode)
	}
}
