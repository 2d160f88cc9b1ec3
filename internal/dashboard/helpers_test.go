package dashboard_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// browser is an HTTP client with a cookie jar, as a browser is: it follows
// no redirects, so that tests see them.
type browser struct {
	t    testing.TB
	env  *sendoncetest.Env
	c    *http.Client
	csrf string
}

func newBrowser(t testing.TB, env *sendoncetest.Env) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, env: env, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

type page struct {
	Status   int
	Body     string
	Location string
	Header   http.Header
}

func (b *browser) do(method, path string, form url.Values) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.env.URL+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	p := page{Status: res.StatusCode, Body: string(raw), Location: res.Header.Get("Location"), Header: res.Header}
	if m := csrfField.FindStringSubmatch(p.Body); m != nil {
		b.csrf = m[1]
	}
	return p
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browser) get(path string) page { b.t.Helper(); return b.do("GET", path, nil) }

// post sends a form with the page's CSRF token.
func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", b.csrf)
	return b.do("POST", path, form)
}

// signIn signs in with secret and fails the test unless it worked.
func (b *browser) signIn(secret string) {
	b.t.Helper()
	if p := b.get("/ui/signin"); p.Status != http.StatusOK {
		b.t.Fatalf("GET /ui/signin: %d", p.Status)
	}
	p := b.post("/ui/signin", url.Values{"key": {secret}})
	if p.Status != http.StatusSeeOther || p.Location != "/" {
		b.t.Fatalf("sign in: %d to %q: %s", p.Status, p.Location, p.Body)
	}
	if p := b.get("/"); p.Status != http.StatusOK {
		b.t.Fatalf("GET / after sign-in: %d %s", p.Status, p.Body)
	}
}
