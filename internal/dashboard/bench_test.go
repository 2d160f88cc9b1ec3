package dashboard_test

// Figures for docs/performance.md: the weight of the sends page and how fast a
// list of 10,000 sends renders, on the server and in Chromium, each with a
// yardstick from the same run (the API's own list; the sign-in page).

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

const benchSends = 10000

// seedSends stores n sent sends in tenant default, straight through the
// store (the API's accept path is not what is measured here).
func seedSends(b *testing.B, env *sendoncetest.Env, n int) {
	b.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	for done := 0; done < n; {
		err := env.Server.Store.InTx(ctx, func(tx core.Tx) error {
			for i := 0; i < 1000 && done+i < n; i++ {
				at := now.Add(-time.Duration(n-done-i) * time.Minute)
				s := &core.Send{ID: app.NewID("snd_"), Tenant: "default", MailboxID: core.DefaultMailboxID, Status: core.StatusSent,
					From: "sender@example.com", To: []string{fmt.Sprintf("user%d@example.net", done+i)}, Subject: fmt.Sprintf("Receipt %d", done+i),
					Text: "Thanks for your order.", Tags: map[string]string{"kind": "receipt"}, CreatedAt: at, UpdatedAt: at,
					MessageID: fmt.Sprintf("<bench%d@example.com>", done+i), IdempotencyKey: fmt.Sprintf("order-%d", done+i)}
				if err := tx.InsertSend(ctx, s); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatalf("seed: %v", err)
		}
		done += 1000
	}
}

// BenchmarkSendsPage times GET /ui/sends (the first page of 10,000 sends)
// and, as the yardstick, GET /v1/sends?limit=50 on the same instance, and
// reports the page's weight: HTML, script and style.
func BenchmarkSendsPage(b *testing.B) {
	env := sendoncetest.Start(b, sendoncetest.Options{NoWorkers: true})
	seedSends(b, env, benchSends)
	jarBrowser := newBenchBrowser(b, env)
	weight := 0
	for _, p := range []string{"/ui/sends", "/ui/assets/app.js", "/ui/assets/app.css"} {
		weight += len(benchGet(b, jarBrowser, env.URL+p, ""))
	}
	for _, c := range []struct{ name, path, key string }{
		{"dashboard", "/ui/sends", ""}, {"overview", "/", ""}, {"api-yardstick", "/v1/sends?limit=50", env.AdminKey},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				benchGet(b, jarBrowser, env.URL+c.path, c.key)
			}
			if c.name == "dashboard" {
				b.ReportMetric(float64(weight), "page-bytes")
			}
		})
	}
}

func newBenchBrowser(b *testing.B, env *sendoncetest.Env) *http.Client {
	b.Helper()
	br := newBrowser(b, env)
	br.get("/ui/signin")
	if p := br.post("/ui/signin", url.Values{"key": {env.AdminKey}}); p.Status != http.StatusSeeOther {
		b.Fatalf("sign in: %d", p.Status)
	}
	return br.c
}

func benchGet(b *testing.B, c *http.Client, u, key string) []byte {
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		b.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d %v", u, res.StatusCode, err)
	}
	return body
}

// BenchmarkBrowserFirstRender loads pages in Chromium and reports the
// median first contentful paint of the sends list (10,000 sends stored),
// the overview (which reads them all) and, as the yardstick, the sign-in
// page.
func BenchmarkBrowserFirstRender(b *testing.B) {
	env := sendoncetest.Start(b, sendoncetest.Options{NoWorkers: true})
	seedSends(b, env, benchSends)
	ctx := newChromium(b)
	signInBrowser(b, ctx, env, env.AdminKey)
	for _, c := range []struct{ name, path string }{{"sends", "/ui/sends"}, {"overview", "/"}, {"signin-yardstick", "/ui/signin"}} {
		b.Run(c.name, func(b *testing.B) {
			var fcp []float64
			for b.Loop() {
				if err := chromedp.Do(ctx, chromedp.Navigate(env.URL+c.path), chromedp.WaitVisible(chromedp.CSS("h1"))); err != nil {
					b.Fatal(err)
				}
				ms, err := chromedp.Run(ctx, chromedp.Poll[float64](
					`(performance.getEntriesByName("first-contentful-paint")[0] || {}).startTime`))
				if err != nil {
					b.Fatal(err)
				}
				fcp = append(fcp, ms)
			}
			slices.Sort(fcp)
			b.ReportMetric(fcp[len(fcp)/2], "fcp-ms")
		})
	}
}
