package dashboard_test

import (
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

var secretField = regexp.MustCompile(`id="secret" class="mono" readonly value="([^"]*)"`)

// shownSecret is the secret a page shows in its one-time field ("" when
// none), unescaped as a browser reads it (html/template writes + as &#43;).
func shownSecret(body string) string {
	m := secretField.FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestDashboard_WebhookPages: an admin creates an endpoint (its secret
// shown on that answer only), sees a send's delivery with its attempts on
// the webhook's and on the send's page, replays it, disables, rotates and
// deletes the endpoint — each change made as the API would.
func TestDashboard_WebhookPages(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{WebhookAllowPrivate: true}, func(t *testing.T, env *sendoncetest.Env) {
		var posts atomic.Int32
		rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if posts.Add(1) == 1 {
				http.Error(w, "not yet", http.StatusServiceUnavailable) // the first attempt fails, the retry works
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(rc.Close)
		br := newBrowser(t, env)
		br.signIn(env.AdminKey)
		br.get("/ui/webhooks")
		if p := br.post("/ui/webhooks", url.Values{"endpoint": {"ftp://x"}, "event": {"email.sent"}}); p.Status != http.StatusBadRequest {
			t.Errorf("create with an ftp endpoint: %d, want 400", p.Status)
		}
		p := br.post("/ui/webhooks", url.Values{"endpoint": {rc.URL + "/hook"}, "event": {"email.sent"}})
		secret := shownSecret(p.Body)
		if p.Status != http.StatusCreated || !strings.HasPrefix(secret, "whsec_") || !strings.Contains(p.Body, `data-copy="secret"`) {
			t.Fatalf("create: %d, secret %q", p.Status, secret)
		}
		hooks, _, err := env.Server.Store.ListWebhooks(context.Background(), "default", core.WebhookPage{Limit: 10})
		if err != nil || len(hooks) != 1 {
			t.Fatalf("after create: %d webhooks (%v)", len(hooks), err)
		}
		h := hooks[0]
		if p := br.get("/ui/webhooks"); shownSecret(p.Body) != "" || strings.Contains(html.UnescapeString(p.Body), secret) || !strings.Contains(p.Body, rc.URL+"/hook") {
			t.Errorf("the webhooks page, opened again, shows the secret or lacks the endpoint")
		}
		send := apiSend(t, env, env.AdminKey, "Hooked", "<p>x</p>")
		var event string
		waitFor(t, "the delivery to succeed", func() bool {
			ds, _, err := env.Server.Store.ListWebhookDeliveries(context.Background(), "default", h.ID, core.WebhookPage{Limit: 1})
			if err == nil && len(ds) == 1 && ds[0].Status == core.DeliverySuccess {
				event = ds[0].EventID
				return true
			}
			return false
		})
		if p := br.get("/ui/webhooks/" + h.ID); !strings.Contains(p.Body, event) || !strings.Contains(p.Body, "s-success") || !strings.Contains(p.Body, send) {
			t.Errorf("the webhook's page lacks its successful delivery of %s", send)
		}
		del := "/ui/webhooks/" + h.ID + "/events/" + event
		p = br.get(del)
		if !strings.Contains(p.Body, "<td>503</td>") || !strings.Contains(p.Body, "<td>204</td>") || !strings.Contains(p.Body, "not yet") {
			t.Errorf("the delivery's page lacks its two attempts (503 with its answer, then 204)")
		}
		// An endpoint's answer is shown to admins only (docs/webhooks.md).
		_, reader := env.NewKey(t, app.NewKeyParams{Name: "reader", Scopes: []core.Scope{core.ScopeRead}})
		rb := newBrowser(t, env)
		rb.signIn(reader)
		if p := rb.get(del); !strings.Contains(p.Body, "<td>503</td>") || strings.Contains(p.Body, "not yet") {
			t.Errorf("a read key's delivery page: want the 503 attempt without the endpoint's answer")
		}
		if p := br.get("/ui/sends/" + send); !strings.Contains(p.Body, `href="`+del+`"`) {
			t.Errorf("the send's page does not link its event's webhook delivery")
		}
		if p := br.get(del + "/replay"); !strings.Contains(p.Body, "handles it twice") {
			t.Errorf("the replay confirmation does not say what happens")
		}
		if p := br.post(del+"/replay", nil); p.Status != http.StatusSeeOther {
			t.Fatalf("replay: %d %s", p.Status, p.Body)
		}
		waitFor(t, "the replay to be posted", func() bool { return posts.Load() >= 3 })

		if p := br.post("/ui/webhooks/"+h.ID+"/status", url.Values{"status": {"sideways"}}); p.Status != http.StatusBadRequest {
			t.Errorf("status sideways: %d, want 400", p.Status)
		}
		br.post("/ui/webhooks/"+h.ID+"/status", url.Values{"status": {"disabled"}})
		if got, _ := env.Server.Store.Webhook(context.Background(), "default", h.ID); got.Status != core.WebhookDisabled {
			t.Errorf("after disable the webhook is %s", got.Status)
		}
		if p := br.get("/ui/webhooks/" + h.ID + "/rotate"); !strings.Contains(p.Body, "new signing secret") {
			t.Errorf("the rotate confirmation does not say what happens")
		}
		p = br.post("/ui/webhooks/"+h.ID+"/rotate", nil)
		if again := shownSecret(p.Body); !strings.HasPrefix(again, "whsec_") || again == secret {
			t.Errorf("rotate showed secret %q, want a new one", again)
		}
		br.get("/ui/webhooks/" + h.ID + "/delete")
		if p := br.post("/ui/webhooks/"+h.ID+"/delete", nil); p.Status != http.StatusSeeOther {
			t.Fatalf("delete: %d", p.Status)
		}
		if p := br.get("/ui/webhooks/" + h.ID); p.Status != http.StatusNotFound {
			t.Errorf("the deleted webhook's page: %d, want 404", p.Status)
		}
	})
}

// TestDashboard_SuppressionsAndRecipients: an admin adds, finds, pages
// and removes suppressions; a bounce's entry links its send, whose page
// shows each recipient's outcome and the bounce's details; the mail the
// bounce listener kept is on the unmatched inbound page.
func TestDashboard_SuppressionsAndRecipients(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		ctx := context.Background()
		send := apiSend(t, env, env.AdminKey, "Bounces", "<p>x</p>")
		// The bounce comes after the delivery, which writes the recipient's
		// state too.
		waitFor(t, "the send to be sent", func() bool {
			s, err := env.Server.Store.Send(ctx, "default", send)
			return err == nil && s.Status == core.StatusSent
		})
		err := env.Server.Store.InTx(ctx, func(tx core.Tx) error {
			if _, err := tx.AddSuppression(ctx, &core.Suppression{ID: "sup_bounced", Tenant: "default", Address: "rcpt@example.net",
				Reason: "5.1.1 no such user", Origin: core.SuppressionBounce, SendID: send, CreatedAt: env.Clock.Now()}); err != nil {
				return err
			}
			if err := tx.SetRecipient(ctx, send, core.RecipientState{Address: "rcpt@example.net", Status: core.StatusBounced,
				Detail: "550 5.1.1 no such user", UpdatedAt: env.Clock.Now()}); err != nil {
				return err
			}
			if err := tx.InsertUnmatched(ctx, &core.UnmatchedInbound{ID: "inb_fixture", Tenant: "default", SendID: send, MailFrom: "daemon@example.net",
				RcptTo: "b@bounce.example", Reason: "not a delivery report", Raw: []byte("hello"), ReceivedAt: env.Clock.Now()}); err != nil {
				return err
			}
			return tx.AddEvent(ctx, send, core.Event{Type: core.EventBounced, At: env.Clock.Now(), Recipient: "rcpt@example.net",
				Bounce: &core.Bounce{Type: core.BouncePermanent, SubType: "NoEmail", Status: "5.1.1", Message: "The mailbox does not exist.",
					DiagnosticCode: []string{"smtp; 550 5.1.1 no such user"}}})
		})
		if err != nil {
			t.Fatal(err)
		}
		br := newBrowser(t, env)
		br.signIn(env.AdminKey)
		p := br.get("/ui/sends/" + send)
		for _, want := range []string{`<span class="status s-bounced">bounced</span></td><td class="mono wrap">550 5.1.1 no such user`,
			"Permanent (NoEmail)", "5.1.1", "The mailbox does not exist.", "smtp; 550 5.1.1 no such user"} {
			if !strings.Contains(p.Body, want) {
				t.Errorf("the send's page lacks %q", want)
			}
		}
		p = br.get("/ui/suppressions")
		if !strings.Contains(p.Body, `href="/ui/sends/`+send+`"`) || !strings.Contains(p.Body, "5.1.1 no such user") {
			t.Errorf("the bounce's entry does not show its reason and link its send")
		}
		if p := br.post("/ui/suppressions", url.Values{"email": {"not an address"}}); p.Status != http.StatusBadRequest {
			t.Errorf("add a non-address: %d, want 400", p.Status)
		}
		if p := br.post("/ui/suppressions", url.Values{"email": {"x@example.org\r\nBcc: y@example.org"}}); p.Status != http.StatusBadRequest {
			t.Errorf("add an address with CR LF: %d, want 400", p.Status)
		}
		for i := range 3 {
			addr := []string{"a", "b", "c"}[i] + "@example.org"
			if p := br.post("/ui/suppressions", url.Values{"email": {strings.ToUpper(addr)}, "reason": {"asked"}}); p.Status != http.StatusCreated || !strings.Contains(p.Body, addr+" is on the list now") {
				t.Fatalf("add %s: %d", addr, p.Status)
			}
		}
		if p := br.post("/ui/suppressions", url.Values{"email": {"a@example.org"}}); p.Status != http.StatusOK || !strings.Contains(p.Body, "was already on the list") {
			t.Errorf("add a listed address again: %d", p.Status)
		}
		if p := br.get("/ui/suppressions?email=B@example.org"); !strings.Contains(p.Body, "<td>b@example.org</td>") || strings.Contains(p.Body, "<td>a@example.org</td>") {
			t.Errorf("the search for b@example.org does not find it alone")
		}
		// Pages of 50: 55 entries make two.
		err = env.Server.Store.InTx(ctx, func(tx core.Tx) error {
			for i := range 51 {
				if _, err := tx.AddSuppression(ctx, &core.Suppression{ID: "sup_page" + string(rune('a'+i/26)) + string(rune('a'+i%26)), Tenant: "default",
					Address: "p" + string(rune('a'+i/26)) + string(rune('a'+i%26)) + "@example.org", Reason: "bulk", Origin: core.SuppressionManual, CreatedAt: env.Clock.Now()}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		first := br.get("/ui/suppressions")
		m := regexp.MustCompile(`href="/ui/suppressions\?after=([^"]+)"`).FindStringSubmatch(first.Body)
		if m == nil {
			t.Fatal("55 entries and no next page")
		}
		second := br.get("/ui/suppressions?after=" + m[1])
		if n1, n2 := strings.Count(first.Body, "<tr id=\"row-sup_"), strings.Count(second.Body, "<tr id=\"row-sup_"); n1 != 50 || n2 != 5 {
			t.Errorf("pages of %d and %d entries, want 50 and 5", n1, n2)
		}
		var id string
		if sup, err := env.Server.Store.Suppression(ctx, "default", "b@example.org"); err == nil {
			id = sup.ID
		}
		if p := br.get("/ui/suppressions/" + id + "/remove"); !strings.Contains(p.Body, "lets sends to it be delivered again") {
			t.Errorf("the remove confirmation does not say what happens")
		}
		if p := br.post("/ui/suppressions/"+id+"/remove", nil); p.Status != http.StatusSeeOther {
			t.Fatalf("remove: %d %s", p.Status, p.Body)
		}
		if ok, _ := env.Server.Store.IsSuppressed(ctx, "default", "b@example.org"); ok {
			t.Error("b@example.org is still suppressed after its removal")
		}
		if p := br.get("/ui/suppressions/b@example.org/remove"); p.Status != http.StatusNotFound {
			t.Errorf("remove by address in the path: %d, want 404 (by id only)", p.Status)
		}
		if p := br.get("/ui/inbound"); p.Status != http.StatusOK || !strings.Contains(p.Body, "not a delivery report") ||
			!strings.Contains(p.Body, "daemon@example.net → b@bounce.example") || !strings.Contains(p.Body, "<td>5 B</td>") {
			t.Errorf("the unmatched inbound page (%d) lacks the kept message", p.Status)
		}
	})
}

// TestDashboard_CancelScheduled: a scheduled send's page offers Cancel,
// whose confirmation says what it will do; confirmed, the send is
// canceled through the app's service and never delivered.
func TestDashboard_CancelScheduled(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		at := env.Clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: env.AdminKey, IdemKey: "sched-1",
			Body: map[string]any{"to": "rcpt@example.net", "subject": "Later", "text": "later", "scheduled_at": at}})
		if r.Status != http.StatusOK {
			t.Fatalf("POST /v1/send: %d %s", r.Status, r.Body)
		}
		id, _ := r.JSON(t)["id"].(string)
		br := newBrowser(t, env)
		br.signIn(env.AdminKey)
		if p := br.get("/ui/sends/" + id); !strings.Contains(p.Body, "action=cancel") {
			t.Fatalf("the scheduled send's page offers no cancel: %s", p.Body)
		}
		if p := br.get("/ui/sends/" + id + "/confirm?action=cancel"); !strings.Contains(p.Body, "nothing is sent to rcpt@example.net") {
			t.Errorf("the confirmation does not say what canceling does")
		}
		if p := br.post("/ui/sends/"+id+"/action", url.Values{"action": {"cancel"}}); p.Status != http.StatusSeeOther {
			t.Fatalf("cancel: %d %s", p.Status, p.Body)
		}
		s, err := env.Server.Store.Send(context.Background(), "default", id)
		if err != nil || s.Status != core.StatusCanceled {
			t.Fatalf("after cancel the send is %v (%v), want canceled", s, err)
		}
		// Canceled, it offers nothing more.
		if p := br.post("/ui/sends/"+id+"/action", url.Values{"action": {"cancel"}}); p.Status == http.StatusSeeOther {
			t.Errorf("a second cancel was accepted")
		}
	})
}
