package dashboard_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestDashboard_PublicHTTPSMakesCookiesSecure: behind a TLS-terminating
// proxy (plain HTTP in, --public-url https://… out) the sign-in and
// session cookies are Secure and the dashboard's answers carry
// Strict-Transport-Security; without --public-url, over plain HTTP,
// neither (a browser would drop a Secure cookie on http://).
func TestDashboard_PublicHTTPSMakesCookiesSecure(t *testing.T) {
	for _, c := range []struct {
		publicURL string
		https     bool
	}{{"https://mail.example.com", true}, {"", false}} {
		env := sendoncetest.Start(t, sendoncetest.Options{NoWorkers: true, PublicURL: c.publicURL})
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := client.Get(env.URL + "/ui/signin")
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, res)
		signin := cookieOf(res, "sendonce_signin")
		if signin == nil {
			t.Fatalf("%q: no sign-in cookie", c.publicURL)
		}
		if hsts := res.Header.Get("Strict-Transport-Security"); (hsts != "") != c.https || (c.https && !strings.HasPrefix(hsts, "max-age=")) {
			t.Errorf("%q: Strict-Transport-Security %q", c.publicURL, hsts)
		}
		m := csrfField.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("%q: no CSRF field on the sign-in page", c.publicURL)
		}
		req, _ := http.NewRequest("POST", env.URL+"/ui/signin", strings.NewReader(url.Values{"key": {env.AdminKey}, "csrf": {m[1]}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", env.URL)
		req.AddCookie(&http.Cookie{Name: signin.Name, Value: signin.Value})
		res, err = client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, res)
		session := cookieOf(res, "sendonce_session")
		if res.StatusCode != http.StatusSeeOther || session == nil {
			t.Fatalf("%q: sign in: %d, session cookie %v", c.publicURL, res.StatusCode, session)
		}
		for _, k := range []*http.Cookie{signin, session} {
			if k.Secure != c.https || !k.HttpOnly {
				t.Errorf("%q: cookie %s Secure=%v HttpOnly=%v, want Secure=%v", c.publicURL, k.Name, k.Secure, k.HttpOnly, c.https)
			}
		}
	}
}

func cookieOf(res *http.Response, name string) *http.Cookie {
	for _, k := range res.Cookies() {
		if k.Name == name {
			return k
		}
	}
	return nil
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, res.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
