package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// receivedMail is a message with a text part, an HTML part whose script
// must never reach a dashboard page, and an attachment.
const receivedMail = "From: Alice <alice@sender.test>\r\nTo: support@recv.test\r\nSubject: Help, please\r\n" +
	"Message-ID: <m1@sender.test>\r\nDate: Wed, 02 Dec 2026 05:00:00 +0000\r\nMIME-Version: 1.0\r\n" +
	"Content-Type: multipart/mixed; boundary=\"M\"\r\n\r\n" +
	"--M\r\nContent-Type: multipart/alternative; boundary=\"A\"\r\n\r\n" +
	"--A\r\nContent-Type: text/plain\r\n\r\nMy order is late.\r\n" +
	"--A\r\nContent-Type: text/html\r\n\r\n<p>My order is <b>late</b>.</p><script>alert('pwned')</script>\r\n--A--\r\n" +
	"--M\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"invoice.pdf\"\r\n" +
	"Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--M--\r\n"

// receiveFixture makes a receiving mailbox at address and receives raw for
// it, as the inbound listener would with those authentication results.
func receiveFixture(t *testing.T, env *sendoncetest.Env, address, raw string, auth core.ReceivedAuth) (mailbox string, r app.Received) {
	t.Helper()
	ctx := context.Background()
	svc := env.Server.Service
	env.OwnDomain(t, "default", address)
	err := svc.InTx(ctx, func(tx core.Tx) error {
		m, err := svc.CreateInbox(ctx, tx, "default", address, "Support")
		if err == nil {
			mailbox = m.ID
			// These pages show a DMARC failure in the inbox: the rule
			// that would quarantine it is quarantine_test.go's.
			err = svc.SetInboxQuarantine(ctx, tx, "default", m.ID, core.QuarantineNone)
		}
		return err
	})
	if err != nil {
		t.Fatalf("create inbox %s: %v", address, err)
	}
	r, err = svc.Receive(ctx, app.Incoming{Tenant: "default", MailboxID: mailbox, Source: "smtp", MailFrom: "alice@sender.test",
		RcptTo: []string{address}, Raw: []byte(raw), Auth: auth})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	return mailbox, r
}

var nonceField = regexp.MustCompile(`name="nonce" value="([^"]+)"`)

// TestDashboard_MailThread: a received message is listed in its mailbox's
// inbox with its unread count; its thread shows the text, the attachment
// and the authentication results with the DMARC failure flagged, its HTML
// only through the sandboxed frame; marking it read changes the count;
// a reply form submitted twice sends one reply, which the thread shows;
// archive moves the thread to the archive tab, and mark unread counts it
// again.
func TestDashboard_MailThread(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{}, func(t *testing.T, env *sendoncetest.Env) {
		mailbox, rcv := receiveFixture(t, env, "support@recv.test", receivedMail, core.ReceivedAuth{SPF: "pass", DKIM: "fail", DMARC: "fail",
			DMARCFailed: true, Results: "recv.test; spf=pass smtp.mailfrom=sender.test; dkim=fail; dmarc=fail header.from=sender.test"})
		br := newBrowser(t, env)
		br.signIn(env.AdminKey)
		p := br.get("/ui/mail?mailbox=" + mailbox)
		if p.Status != http.StatusOK || !strings.Contains(p.Body, `href="/ui/mail/`+rcv.ThreadID+`"`) || !strings.Contains(p.Body, "1 unread") {
			t.Fatalf("the mailbox's inbox (%d) lacks the thread with 1 unread: %s", p.Status, p.Body)
		}
		if p := br.get("/ui/mail?folder=archive"); strings.Contains(p.Body, rcv.ThreadID) {
			t.Errorf("the archive lists the thread, which is in the inbox")
		}
		thread := "/ui/mail/" + rcv.ThreadID
		checkMessagePage(t, br, rcv)
		if p := br.get("/ui/mail?mailbox=" + mailbox); strings.Contains(p.Body, "1 unread") || !strings.Contains(p.Body, rcv.ThreadID) {
			t.Errorf("after the thread was opened the list still counts the message unread")
		}
		if p := br.post(thread+"/change", url.Values{"do": {"unread"}}); p.Status != http.StatusSeeOther {
			t.Fatalf("mark unread: %d %s", p.Status, p.Body)
		}
		if p := br.get("/ui/mail?mailbox=" + mailbox); !strings.Contains(p.Body, "1 unread") {
			t.Errorf("after mark unread the list does not count the message unread")
		}
		if p := br.post(thread+"/change", url.Values{"do": {"read"}}); p.Status != http.StatusSeeOther {
			t.Fatalf("mark read: %d %s", p.Status, p.Body)
		}
		if p := br.get("/ui/mail?mailbox=" + mailbox); strings.Contains(p.Body, "1 unread") || !strings.Contains(p.Body, rcv.ThreadID) {
			t.Errorf("after mark read the list still counts the message unread")
		}

		env.Clock.Advance(time.Minute) // the reply comes after the message
		sendID, nonce := replyTwice(t, env, br, rcv)
		p = br.get(thread)
		if i, j := strings.Index(p.Body, `id="msg-`+rcv.ID+`"`), strings.Index(p.Body, `id="msg-`+sendID+`"`); i < 0 || j < i || !strings.Contains(p.Body, "We are on it.") {
			t.Errorf("the thread page does not show the message, then the reply")
		}
		// The same nonce with other text is another reply under a used key.
		if r := br.post("/ui/received/"+rcv.ID+"/reply", url.Values{"text": {"Something else"}, "nonce": {nonce}}); r.Status != http.StatusConflict {
			t.Errorf("a used nonce with other text: %d, want 409", r.Status)
		}

		if p := br.post(thread+"/change", url.Values{"do": {"archive"}}); p.Status != http.StatusSeeOther {
			t.Fatalf("archive: %d", p.Status)
		}
		if p := br.get("/ui/mail"); strings.Contains(p.Body, rcv.ThreadID) {
			t.Errorf("the archived thread is still in the inbox tab")
		}
		if p := br.get("/ui/mail?folder=archive"); !strings.Contains(p.Body, rcv.ThreadID) {
			t.Errorf("the archived thread is not in the archive tab")
		}
		br.post(thread+"/change", url.Values{"do": {"unread"}})
		if p := br.get("/ui/mail?folder=archive"); !strings.Contains(p.Body, "1 unread") {
			t.Errorf("after mark unread the archive tab does not count the message unread")
		}
	})
}

// checkMessagePage: the thread page shows the received message's text,
// attachment and failed DMARC, its HTML only as the sandboxed frame's
// source; the raw source is escaped text; the attachment downloads.
func checkMessagePage(t *testing.T, br *browser, rcv app.Received) {
	t.Helper()
	p := br.get("/ui/mail/" + rcv.ThreadID)
	for _, want := range []string{"My order is late.", "invoice.pdf", "application/pdf", "/ui/received/" + rcv.ID + "/attachments/",
		`src="/ui/received/` + rcv.ID + `/html"`, `sandbox=""`, "dmarc-failed", "DMARC failed", "dkim=fail; dmarc=fail", "/ui/received/" + rcv.ID + "/raw"} {
		if !strings.Contains(p.Body, want) {
			t.Errorf("the thread page lacks %q", want)
		}
	}
	if strings.Contains(p.Body, "<script>alert") || strings.Contains(p.Body, "<b>late</b>") {
		t.Errorf("the thread page inlines the message's HTML")
	}
	h := br.get("/ui/received/" + rcv.ID + "/html")
	if csp := h.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") || !strings.Contains(h.Body, "<b>late</b>") {
		t.Errorf("the HTML frame's source: CSP %q, body %q", csp, h.Body)
	}
	raw := br.get("/ui/received/" + rcv.ID + "/raw")
	if !strings.Contains(raw.Body, "&lt;script&gt;alert(") || strings.Contains(raw.Body, "<script>alert") {
		t.Errorf("the raw source page does not show the source escaped as text")
	}
	att := regexp.MustCompile(`/ui/received/` + rcv.ID + `/attachments/[^"]+`).FindString(p.Body)
	if a := br.get(att); a.Body != "%PDF-1.4\n" || !strings.HasPrefix(a.Header.Get("Content-Disposition"), "attachment") {
		t.Errorf("attachment download: %q, %q", a.Body, a.Header.Get("Content-Disposition"))
	}
}

// replyTwice submits the thread page's reply form twice and checks that
// one send answered the message, in the thread after it and in the audit
// log; it returns the send and the form's nonce.
func replyTwice(t *testing.T, env *sendoncetest.Env, br *browser, rcv app.Received) (sendID, nonce string) {
	t.Helper()
	thread := "/ui/mail/" + rcv.ThreadID
	p := br.get(thread)
	m := nonceField.FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatal("the thread page has no reply form")
	}
	form := url.Values{"text": {"We are on it."}, "nonce": {m[1]}}
	var sendIDs []string
	for i := range 2 {
		r := br.post("/ui/received/"+rcv.ID+"/reply", form)
		if r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Location, thread+"#msg-snd_") {
			t.Fatalf("reply %d: %d to %q: %s", i, r.Status, r.Location, r.Body)
		}
		sendIDs = append(sendIDs, strings.TrimPrefix(r.Location, thread+"#msg-"))
	}
	if sendIDs[0] != sendIDs[1] {
		t.Errorf("one form submitted twice made two sends: %v", sendIDs)
	}
	items, err := env.Server.Service.ThreadItems(context.Background(), mustKey(t, env), rcv.ThreadID)
	if err != nil || len(items) != 2 || items[0].ID != rcv.ID || items[1].ID != sendIDs[0] {
		t.Fatalf("thread items %+v (%v), want the message then one reply", items, err)
	}
	audit, _, err := env.Server.Store.ListAudit(context.Background(), "default", 10, "")
	var outcomes []string
	for _, e := range audit {
		if e.Route == "POST /ui/received/{id}/reply" && e.SendID == sendIDs[0] {
			outcomes = append(outcomes, e.Outcome)
		}
	}
	if slices.Sort(outcomes); err != nil || strings.Join(outcomes, ",") != "created,replayed" {
		t.Errorf("the audit log has the reply as %v (%v), want created then replayed", outcomes, err)
	}
	s, err := env.Server.Store.Send(context.Background(), "default", sendIDs[0])
	if err != nil || s.Subject != "Re: Help, please" || s.InReplyTo != "<m1@sender.test>" || len(s.To) != 1 || !strings.Contains(s.To[0], "alice@sender.test") {
		t.Errorf("the reply %+v (%v) is not an answer to the message", s, err)
	}
	return sendIDs[0], m[1]
}

// mustKey is the admin key's record, to read as the dashboard does.
func mustKey(t *testing.T, env *sendoncetest.Env) *core.APIKey {
	t.Helper()
	k, err := env.Server.Service.Authenticate(context.Background(), env.AdminKey)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestDashboard_MailLimitedToItsMailboxes: a key limited to another
// mailbox lists none of the mail and opens none of it; a read-only key
// sees it but neither changes nor answers it.
func TestDashboard_MailLimitedToItsMailboxes(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{})
	mailbox, rcv := receiveFixture(t, env, "support@recv.test", receivedMail, core.ReceivedAuth{})
	other, _ := receiveFixture(t, env, "other@recv.test", strings.Replace(receivedMail, "<m1@", "<m2@", 1), core.ReceivedAuth{})
	_, limited := env.NewKey(t, app.NewKeyParams{Name: "limited", Scopes: []core.Scope{core.ScopeRead, core.ScopeSend}, Mailboxes: []string{other}})
	br := newBrowser(t, env)
	br.signIn(limited)
	if p := br.get("/ui/mail"); strings.Contains(p.Body, rcv.ThreadID) || strings.Contains(p.Body, "support@recv.test") {
		t.Errorf("a key limited to another mailbox lists this one's mail")
	}
	if p := br.get("/ui/mail?mailbox=" + mailbox); p.Status != http.StatusNotFound {
		t.Errorf("a key limited to another mailbox filtering on this one: %d, want 404", p.Status)
	}
	for _, path := range []string{"/ui/mail/" + rcv.ThreadID, "/ui/received/" + rcv.ID + "/html", "/ui/received/" + rcv.ID + "/raw"} {
		if p := br.get(path); p.Status != http.StatusNotFound || strings.Contains(p.Body, "order is late") {
			t.Errorf("GET %s with a key limited to another mailbox: %d, want 404", path, p.Status)
		}
	}
	br.get("/ui/mail")
	if p := br.post("/ui/mail/"+rcv.ThreadID+"/change", url.Values{"do": {"read"}}); p.Status != http.StatusNotFound {
		t.Errorf("mark read with a key limited to another mailbox: %d, want 404", p.Status)
	}
	if p := br.post("/ui/received/"+rcv.ID+"/reply", url.Values{"text": {"hi"}, "nonce": {"n1"}}); p.Status != http.StatusNotFound {
		t.Errorf("reply with a key limited to another mailbox: %d, want 404", p.Status)
	}

	_, reader := env.NewKey(t, app.NewKeyParams{Name: "reader", Scopes: []core.Scope{core.ScopeRead}})
	rd := newBrowser(t, env)
	rd.signIn(reader)
	p := rd.get("/ui/mail/" + rcv.ThreadID)
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "order is late") {
		t.Fatalf("a read key opening the thread: %d", p.Status)
	}
	if strings.Contains(p.Body, `name="nonce"`) || strings.Contains(p.Body, "/change\"") {
		t.Errorf("a read key is offered the reply or change forms")
	}
	if p := rd.post("/ui/received/"+rcv.ID+"/reply", url.Values{"text": {"hi"}, "nonce": {"n2"}}); p.Status != http.StatusForbidden {
		t.Errorf("reply with a read key: %d, want 403", p.Status)
	}
	if p := rd.post("/ui/mail/"+rcv.ThreadID+"/change", url.Values{"do": {"read"}}); p.Status != http.StatusForbidden {
		t.Errorf("mark read with a read key: %d, want 403", p.Status)
	}
	if th, err := env.Server.Store.Thread(context.Background(), "default", rcv.ThreadID); err != nil || th.Unread != 1 || th.Messages != 1 {
		t.Errorf("after the refused changes the thread is %+v (%v), want 1 message, unread", th, err)
	}
}

// TestDashboard_ReplyDoorRules: the dashboard's reply needs what the
// API's does (send and read, as POST /v1/received/{id}/reply): a
// send-only key cannot sign in, so its reply form is never reached and
// sends nothing; a key with both replies once per form.
func TestDashboard_ReplyDoorRules(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{})
	_, rcv := receiveFixture(t, env, "support@recv.test", receivedMail, core.ReceivedAuth{})
	_, sendOnly := env.NewKey(t, app.NewKeyParams{Name: "send-only", Scopes: []core.Scope{core.ScopeSend}})
	so := newBrowser(t, env)
	so.get("/ui/signin")
	if p := so.post("/ui/signin", url.Values{"key": {sendOnly}}); p.Status != http.StatusForbidden {
		t.Fatalf("sign in with a send-only key: %d, want 403", p.Status)
	}
	if p := so.post("/ui/received/"+rcv.ID+"/reply", url.Values{"text": {"hi"}, "nonce": {"n-so"}}); p.Status == http.StatusSeeOther && strings.Contains(p.Location, "#msg-") {
		t.Errorf("a dashboard reply without a session that may read: %d to %s", p.Status, p.Location)
	}
	if n := env.QueryInt(t, "SELECT COUNT(*) FROM sends"); n != 0 {
		t.Errorf("a send-only key's dashboard reply made %d sends", n)
	}
	_, both := env.NewKey(t, app.NewKeyParams{Name: "both", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead}})
	br := newBrowser(t, env)
	br.signIn(both)
	replyTwice(t, env, br, rcv)
}
