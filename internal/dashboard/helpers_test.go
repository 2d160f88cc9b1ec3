package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
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

// apiSend sends through the API and returns the send's id.
func apiSend(t *testing.T, env *sendoncetest.Env, key, subject, html string) string {
	t.Helper()
	r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: key, IdemKey: app.NewID("k"),
		Body: map[string]any{"to": []string{"rcpt@example.net"}, "subject": subject, "html": html, "text": "text body"}})
	if r.Status != http.StatusOK {
		t.Fatalf("POST /v1/send: %d %s", r.Status, r.Body)
	}
	id, _ := r.JSON(t)["id"].(string)
	return id
}

// unchanged fails the test unless the fixture's webhook and suppression
// are as makeFixture left them.
func (f fixture) unchanged(t *testing.T, env *sendoncetest.Env, after string) {
	t.Helper()
	ctx := context.Background()
	h, err := env.Server.Store.Webhook(ctx, "default", f.webhook)
	if err != nil || h.Status != core.WebhookEnabled || string(h.Secret) != "whsec_fixture" {
		t.Errorf("after %s the webhook is %+v (%v), want enabled with its secret", after, h, err)
	}
	if _, err := env.Server.Store.Suppression(ctx, "default", f.suppression); err != nil {
		t.Errorf("after %s the suppression is gone: %v", after, err)
	}
	if hooks, _, _ := env.Server.Store.ListWebhooks(ctx, "default", core.WebhookPage{Limit: 10}); len(hooks) != 1 {
		t.Errorf("after %s tenant default has %d webhooks, want 1", after, len(hooks))
	}
	if _, err := env.Server.Store.Suppression(ctx, "default", "new@fixture.example"); err == nil {
		t.Errorf("after %s new@fixture.example is suppressed", after)
	}
	if d, err := env.Server.Store.Draft(ctx, "default", f.draft); err != nil || d.SendID != "" || d.Version != 1 {
		t.Errorf("after %s the draft is %+v (%v), want unsent and unedited", after, d, err)
	}
	if th, err := env.Server.Store.Thread(ctx, "default", f.thread); err != nil || th.Unread != 1 || th.Messages != 1 {
		t.Errorf("after %s the thread is %+v (%v), want its one message unread and no reply", after, th, err)
	}
}
