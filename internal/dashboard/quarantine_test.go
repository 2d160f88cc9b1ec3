package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestDashboard_Quarantine: a message that failed DMARC, received for an
// inbox under the default rule, is on the admin's quarantine page (not in
// the mail list); Release puts it in a thread in the inbox; a second
// message is deleted from the page. An agent key's session, admin though
// it is, cannot open the page, and a key without admin does not get it.
func TestDashboard_Quarantine(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		ctx, svc := context.Background(), env.Server.Service
		inbox := env.NewInbox(t, "default", "support@recv.test", "Support")
		forged := core.ReceivedAuth{SPF: "fail", DKIM: "none", DMARC: "fail", DMARCFailed: true}
		var ids []string
		for _, subject := range []string{"Wire the money", "Reset your password"} {
			raw := "From: ceo@forged.test\r\nTo: support@recv.test\r\nSubject: " + subject + "\r\nMessage-ID: <" + subject[:4] +
				"@forged.test>\r\n\r\nToday.\r\n"
			r, err := svc.Receive(ctx, app.Incoming{Tenant: "default", MailboxID: inbox.ID, Source: "smtp",
				MailFrom: "ceo@forged.test", RcptTo: []string{"support@recv.test"}, Raw: []byte(raw), Auth: forged})
			if err != nil || !r.Quarantined || r.ThreadID != "" {
				t.Fatalf("receive %q: %+v %v, want quarantined outside any thread", subject, r, err)
			}
			ids = append(ids, r.ID)
		}

		br := newBrowser(t, env)
		br.signIn(env.AdminKey)
		if p := br.get("/ui/mail"); strings.Contains(p.Body, "Wire the money") {
			t.Fatalf("the mail list shows a quarantined message")
		}
		p := br.get("/ui/quarantine")
		if p.Status != http.StatusOK || !strings.Contains(p.Body, `id="row-`+ids[0]+`"`) || !strings.Contains(p.Body, "DMARC failed") {
			t.Fatalf("the quarantine page (%d) lacks the message: %s", p.Status, p.Body)
		}
		if r := br.post("/ui/quarantine/"+ids[0]+"/release", url.Values{}); r.Status != http.StatusSeeOther {
			t.Fatalf("release: %d %s", r.Status, r.Body)
		}
		if p := br.get("/ui/mail"); !strings.Contains(p.Body, "Wire the money") {
			t.Errorf("the released message is not in the mail list")
		}
		if r := br.post("/ui/quarantine/"+ids[1]+"/delete", url.Values{}); r.Status != http.StatusSeeOther {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		if p := br.get("/ui/quarantine"); strings.Contains(p.Body, `id="row-`) {
			t.Errorf("the quarantine still lists a message after release and delete: %s", p.Body)
		}
		if r := br.post("/ui/quarantine/"+ids[0]+"/delete", url.Values{}); r.Status == http.StatusSeeOther {
			t.Errorf("the page deleted a message that is no longer quarantined")
		}

		_, agent := env.NewKey(t, app.NewKeyParams{Name: "agent", Agent: true,
			Scopes: []core.Scope{core.ScopeSend, core.ScopeRead, core.ScopeAdmin}})
		_, reader := env.NewKey(t, app.NewKeyParams{Name: "reader", Scopes: []core.Scope{core.ScopeRead}})
		for _, k := range []string{agent, reader} {
			other := newBrowser(t, env)
			other.signIn(k)
			if p := other.get("/ui/quarantine"); p.Status != http.StatusForbidden {
				t.Errorf("the quarantine page for an agent's or reader's session: %d, want 403", p.Status)
			}
		}
	})
}
