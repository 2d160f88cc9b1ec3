package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestDashboard_DMARCPage: with two reports received at a report
// address, the DMARC page charts pass and fail per day as inline SVG (no
// script in it) and lists the sources with their counts and whether they are
// sendonce's own; before any report it says how to get them.
func TestDashboard_DMARCPage(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{EgressSources: []string{"out1=192.0.2.10"}}, func(t *testing.T, env *sendoncetest.Env) {
		br := newBrowser(t, env)
		br.signIn(env.AdminKey)
		if p := br.get("/ui/dmarc"); p.Status != http.StatusOK || !strings.Contains(p.Body, "No DMARC reports yet") {
			t.Fatalf("before any report: %d %s", p.Status, p.Body)
		}
		env.OwnDomain(t, "default", "dmarc@example.test")
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/inboxes", Key: env.AdminKey, IdemKey: "dmarc-inbox",
			Body: map[string]any{"address": "dmarc@example.test", "dmarc_reports": true}})
		if r.Status != http.StatusCreated || r.JSON(t)["dmarc_reports"] != true {
			t.Fatalf("create inbox: %d %s", r.Status, r.Body)
		}
		inbox := r.JSON(t)["id"].(string)
		now := env.Clock.Now()
		for i, rows := range [][2]string{{"192.0.2.10", "pass"}, {"198.51.100.7", "fail"}} {
			xml := fmt.Sprintf(`<feedback><report_metadata><org_name>Org %d</org_name><email>r@org.test</email><report_id>id-%d</report_id>
<date_range><begin>%d</begin><end>%d</end></date_range></report_metadata><policy_published><domain>example.test</domain><p>none</p></policy_published>
<record><row><source_ip>%s</source_ip><count>%d</count><policy_evaluated><disposition>none</disposition><dkim>%s</dkim><spf>fail</spf></policy_evaluated></row>
<identifiers><header_from>example.test</header_from></identifiers></record></feedback>`,
				i, i, now.Add(-time.Duration(i+1)*24*time.Hour).Unix(), now.Add(-time.Duration(i)*24*time.Hour).Unix(), rows[0], 3+i, rows[1])
			raw := "From: r@org.test\r\nTo: dmarc@example.test\r\nSubject: report\r\nMIME-Version: 1.0\r\n" +
				"Content-Type: text/xml; name=\"r.xml\"\r\nContent-Disposition: attachment; filename=\"r.xml\"\r\n\r\n" + xml
			if _, err := env.Server.Service.Receive(context.Background(), app.Incoming{Tenant: "default", MailboxID: inbox,
				Source: "smtp", RcptTo: []string{"dmarc@example.test"}, Raw: []byte(raw)}); err != nil {
				t.Fatal(err)
			}
		}
		p := br.get("/ui/dmarc")
		if p.Status != http.StatusOK {
			t.Fatalf("page: %d %s", p.Status, p.Body)
		}
		for _, want := range []string{`<svg class="chart"`, `<rect class="sent"`, `<rect class="failed"`, "192.0.2.10", "198.51.100.7",
			"<td>yes</td>", "<td>no</td>", "Org 0", "id-1", `value="example.test"`} {
			if !strings.Contains(p.Body, want) {
				t.Fatalf("the page lacks %q:\n%s", want, p.Body)
			}
		}
		if svg := p.Body[strings.Index(p.Body, "<svg"):strings.Index(p.Body, "</svg>")]; strings.Contains(svg, "<script") {
			t.Fatal("the chart has a script")
		}
		if p := br.get("/ui/dmarc?domain=other.test&days=30"); p.Status != http.StatusOK || !strings.Contains(p.Body, "No reports about other.test") {
			t.Fatalf("another domain: %d %s", p.Status, p.Body)
		}
	})
}
