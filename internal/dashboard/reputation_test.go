package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// complaintAbout is a feedback report naming rcpt.
func complaintAbout(rcpt string) []byte {
	return []byte("From: fbl@isp.test\r\nTo: b@example.test\r\nSubject: complaint\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/report; report-type=feedback-report; boundary=\"F\"\r\n\r\n" +
		"--F\r\nContent-Type: text/plain\r\n\r\nA complaint.\r\n" +
		"--F\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: abuse\r\nVersion: 1\r\nOriginal-Rcpt-To: <" + rcpt + ">\r\n--F--\r\n")
}

var polyline = regexp.MustCompile(`<polyline class="rate complaints" points="([^"]*)"`)

// The Reputation page: the paused state, both rates and a chart of 48
// hourly points for any read key; the resume form only for admins, which
// needs the CSRF token, resumes once under its nonce (a double submit
// changes nothing more) and lets the queued bulk mail go.
func TestDashboard_ReputationPageAndResume(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend,
			Reputation: app.ReputationThresholds{ComplaintRate: 0.5, BounceRate: 0.5, MinSends: 2}})
		var ids []string
		for i, to := range []string{"a@example.com", "b@example.com"} {
			r := env.Send(t, "bulk-"+to, map[string]any{"to": to, "subject": "news", "text": "x", "stream": "bulk"})
			ids = append(ids, r.JSON(t)["id"].(string))
			env.WaitStatus(t, ids[i], 20*time.Second, core.StatusSent)
		}
		if res, err := env.Server.Service.RecordBounceReport(context.Background(), app.BounceReport{SendID: ids[0], Bound: -1,
			Raw: complaintAbout("a@example.com")}); err != nil || res != app.ReportRecorded {
			t.Fatalf("record the complaint: %v %v", res, err)
		}
		queued := env.Send(t, "bulk-late", map[string]any{"to": "c@example.com", "subject": "news", "text": "x", "stream": "bulk"}).JSON(t)["id"].(string)

		_, read := env.NewKey(t, app.NewKeyParams{Name: "reader", Scopes: []core.Scope{core.ScopeRead}})
		rb := newBrowser(t, env)
		rb.signIn(read)
		p := rb.get("/ui/reputation")
		if p.Status != http.StatusOK || !strings.Contains(p.Body, "<b>paused</b>") || !strings.Contains(p.Body, "50.00 %") {
			t.Fatalf("the reputation page for a read key: %d, want paused at 50.00 %%:\n%s", p.Status, p.Body)
		}
		if m := polyline.FindStringSubmatch(p.Body); m == nil || len(strings.Fields(m[1])) != 48 {
			t.Errorf("the chart's complaint line: %v, want 48 hourly points", m)
		}
		if strings.Contains(p.Body, "/ui/reputation/resume") {
			t.Errorf("a read key's page offers the resume button")
		}
		if p := rb.post("/ui/reputation/resume", url.Values{"nonce": {"x"}}); p.Status != http.StatusForbidden {
			t.Errorf("a read key's resume: %d, want 403", p.Status)
		}

		ab := newBrowser(t, env)
		ab.signIn(env.AdminKey)
		page := ab.get("/ui/reputation")
		m := regexp.MustCompile(`name="nonce" value="([^"]+)"`).FindStringSubmatch(page.Body)
		if m == nil {
			t.Fatalf("the admin's page has no resume form:\n%s", page.Body)
		}
		if p := ab.do("POST", "/ui/reputation/resume", url.Values{"nonce": {m[1]}}); p.Status != http.StatusForbidden {
			t.Errorf("a resume without the CSRF token: %d, want 403", p.Status)
		}
		for range 2 { // a double submit
			if p := ab.post("/ui/reputation/resume", url.Values{"nonce": {m[1]}}); p.Status != http.StatusSeeOther || p.Location != "/ui/reputation" {
				t.Fatalf("resume: %d to %q: %s", p.Status, p.Location, p.Body)
			}
		}
		if p := ab.get("/ui/reputation"); !strings.Contains(p.Body, "<b>active</b>") {
			t.Errorf("after the resume the page does not say active")
		}
		env.WaitStatus(t, queued, 20*time.Second, core.StatusSent)
	})
}
