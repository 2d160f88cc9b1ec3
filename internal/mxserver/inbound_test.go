package mxserver_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

const wait = 15 * time.Second

// report is one per-recipient block of a DSN the tests write.
type report struct{ rcpt, action, status, diag string }

// dsnMail builds a Postfix-shaped DSN about msgID.
func dsnMail(to, msgID string, rs ...report) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "From: MAILER-DAEMON@relay.test\r\nTo: %s\r\nSubject: Undelivered Mail Returned to Sender\r\n", to)
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: multipart/report; report-type=delivery-status; boundary=\"BND\"\r\n\r\n")
	b.WriteString("--BND\r\nContent-Type: text/plain\r\n\r\nYour message could not be delivered.\r\n")
	b.WriteString("--BND\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; relay.test\r\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "\r\nFinal-Recipient: rfc822; %s\r\nAction: %s\r\nStatus: %s\r\n", r.rcpt, r.action, r.status)
		if r.diag != "" {
			fmt.Fprintf(&b, "Diagnostic-Code: smtp; %s\r\n", r.diag)
		}
	}
	fmt.Fprintf(&b, "--BND\r\nContent-Type: text/rfc822-headers\r\n\r\nMessage-ID: %s\r\nSubject: x\r\n--BND--\r\n", msgID)
	return []byte(b.String())
}

// arfMail builds a feedback report about msgID from rcpt.
func arfMail(to, msgID, rcpt string) []byte {
	return []byte("From: fbl@isp.test\r\nTo: " + to + "\r\nSubject: complaint\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/report; report-type=feedback-report; boundary=\"F\"\r\n\r\n" +
		"--F\r\nContent-Type: text/plain\r\n\r\nA complaint.\r\n" +
		"--F\r\nContent-Type: message/feedback-report\r\n\r\nFeedback-Type: abuse\r\nUser-Agent: FBL/1\r\nVersion: 1\r\nOriginal-Rcpt-To: <" + rcpt + ">\r\n" +
		"--F\r\nContent-Type: message/rfc822\r\n\r\nMessage-ID: " + msgID + "\r\nTo: " + rcpt + "\r\nSubject: x\r\n\r\nbody\r\n--F--\r\n")
}

// deliver hands raw to the inbound listener for rcpt, as an MTA returning
// a report would (MAIL FROM:<>).
func deliver(t *testing.T, addr, rcpt string, raw []byte) error {
	t.Helper()
	return deliverFrom(t, addr, "", rcpt, raw)
}

func deliverFrom(t *testing.T, addr, from, rcpt string, raw []byte) error {
	t.Helper()
	_, err := deliverReply(t, addr, from, rcpt, raw)
	return err
}

// helloRelay connects to the inbound listener at addr and says HELO as
// a relay would; the caller closes the client.
func helloRelay(t *testing.T, addr string) *smtp.Client {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatalf("dial inbound: %v", err)
	}
	if err := c.Hello("relay.test"); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c
}

// deliverReply is deliverFrom that also returns the 250's text.
func deliverReply(t *testing.T, addr, from, rcpt string, raw []byte) (string, error) {
	t.Helper()
	c := helloRelay(t, addr)
	defer c.Close()
	if err := c.Mail(from, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt(rcpt, nil); err != nil {
		return "", err
	}
	w, err := c.Data()
	if err != nil {
		return "", err
	}
	if _, err := w.Write(raw); err != nil {
		return "", err
	}
	resp, err := w.CloseWithResponse()
	if err != nil {
		return "", err
	}
	return resp.StatusText, nil
}

func smtpCode(err error) int {
	var e *smtp.SMTPError
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

func sendTo(t *testing.T, env *sendoncetest.Env, key string, body map[string]any) (id, msgID string) {
	t.Helper()
	r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/send", Key: key, IdemKey: app.NewID("k"), Body: body})
	if r.Status != http.StatusOK {
		t.Fatalf("send: %d %s", r.Status, r.Body)
	}
	m := r.JSON(t)
	return m["id"].(string), m["message_id"].(string)
}

func get(t *testing.T, env *sendoncetest.Env, key, path string) (int, map[string]any) {
	t.Helper()
	r := env.Do(t, sendoncetest.Request{Method: "GET", Path: path, Key: key})
	if r.Status != http.StatusOK {
		return r.Status, nil
	}
	return r.Status, r.JSON(t)
}

func recipients(s map[string]any) map[string]string {
	out := map[string]string{}
	rs, _ := s["recipients"].([]any)
	for _, r := range rs {
		m := r.(map[string]any)
		out[m["email"].(string)] = m["status"].(string)
	}
	return out
}

// events lists a send's events of one type as "recipient" strings.
func events(s map[string]any, typ string) []string {
	var out []string
	evs, _ := s["events"].([]any)
	for _, e := range evs {
		m := e.(map[string]any)
		if m["type"] == typ {
			r, _ := m["recipient"].(string)
			out = append(out, r)
		}
	}
	return out
}

// TestInbound_PermanentBounceSuppressesUntilDeleted: a 5.1.1 DSN to the
// send's VERP address bounces the recipient and suppresses it; the same
// report again changes nothing; the next send to it is not attempted;
// deleting the suppression lets the one after through.
func TestInbound_PermanentBounceSuppressesUntilDeleted(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		id, msgID := sendTo(t, env, env.AdminKey, sendoncetest.Mail("Nobody <nobody@rcpt.test>", "hello"))
		env.WaitStatus(t, id, wait, core.StatusSent)

		msgs := env.SMTP.Messages()
		verp := env.Server.Bounce.RecipientAddress(id, 0) // one recipient: its own address
		if len(msgs) != 1 || msgs[0].From != verp || !strings.HasPrefix(verp, "bounce+") || !strings.HasSuffix(verp, "@bounces.example.test") {
			t.Fatalf("relay got %d messages, MAIL FROM %q; want one from the VERP address %q", len(msgs), msgs[0].From, verp)
		}
		hdr, err := mail.ReadMessage(bytes.NewReader(msgs[0].Data))
		if from, _ := hdr.Header.AddressList("From"); err != nil || len(from) != 1 || from[0].Address != "sender@example.com" {
			t.Fatalf("From header %q (%v): want it unchanged", hdr.Header.Get("From"), err)
		}

		raw := dsnMail(verp, msgID, report{"nobody@rcpt.test", "failed", "5.1.1", "550 5.1.1 <nobody@rcpt.test>: User unknown"})
		if err := deliver(t, env.InboundAddr, verp, raw); err != nil {
			t.Fatalf("deliver DSN: %v", err)
		}
		s := env.WaitStatus(t, id, wait, core.StatusBounced)
		if got := recipients(s); got["nobody@rcpt.test"] != "bounced" {
			t.Errorf("recipients %v, want nobody@ bounced", got)
		}
		if got := events(s, core.EventBounced); len(got) != 1 || got[0] != "nobody@rcpt.test" {
			t.Errorf("bounced events %v, want one for nobody@rcpt.test", got)
		}
		st, sup := get(t, env, env.AdminKey, "/v1/suppressions/NOBODY@rcpt.test")
		if st != http.StatusOK || sup["origin"] != "bounce" || sup["send_id"] != id || !strings.Contains(sup["reason"].(string), "5.1.1") {
			t.Fatalf("suppression: %d %v; want origin bounce, send %s, reason naming 5.1.1", st, sup, id)
		}

		// The same report again (an MTA that retried its delivery): recorded once.
		if err := deliver(t, env.InboundAddr, verp, raw); err != nil {
			t.Fatalf("deliver DSN again: %v", err)
		}
		_, s = get(t, env, env.AdminKey, "/v1/sends/"+id)
		if got := events(s, core.EventBounced); len(got) != 1 {
			t.Errorf("after the duplicate: %d bounced events, want 1", len(got))
		}
		if n := env.QueryInt(t, `SELECT count(*) FROM inbound_reports`); n != 1 {
			t.Errorf("%d reports recorded, want 1", n)
		}

		next, _ := sendTo(t, env, env.AdminKey, sendoncetest.Mail("nobody@rcpt.test", "again"))
		s = env.WaitStatus(t, next, wait, core.StatusSuppressed)
		if got := events(s, core.EventSuppressed); len(got) != 1 || len(env.SMTP.Messages()) != 1 {
			t.Fatalf("suppressed send: events %v, relay messages %d; want one email.suppressed and nothing sent", got, len(env.SMTP.Messages()))
		}

		if r := env.Do(t, sendoncetest.Request{Method: "DELETE", Path: "/v1/suppressions/nobody@rcpt.test", Key: env.AdminKey}); r.Status != http.StatusOK {
			t.Fatalf("delete suppression: %d %s", r.Status, r.Body)
		}
		after, _ := sendTo(t, env, env.AdminKey, sendoncetest.Mail("nobody@rcpt.test", "after"))
		env.WaitStatus(t, after, wait, core.StatusSent)
		if n := len(env.SMTP.Messages()); n != 2 {
			t.Fatalf("relay has %d messages after the suppression was deleted, want 2", n)
		}
	})
}

// TestInbound_ReportShapes: a missing mailbox that suppresses, a full one
// that does not, a delay, a delivery and a feedback report, each doing
// what the contract's section 11 says; each to the bounce address of its
// own single-recipient send.
func TestInbound_ReportShapes(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		type sent struct{ id, msgID, verp string }
		send := func(to string) sent {
			id, msgID := sendTo(t, env, env.AdminKey, sendoncetest.Mail(to, "shape"))
			env.WaitStatus(t, id, wait, core.StatusSent)
			return sent{id, msgID, env.Server.Bounce.RecipientAddress(id, 0)}
		}
		report1 := func(s sent, r ...report) {
			t.Helper()
			if err := deliver(t, env.InboundAddr, s.verp, dsnMail(s.verp, s.msgID, r...)); err != nil {
				t.Fatal(err)
			}
		}
		a, bb, c := send("a@one.test"), send("b@two.test"), send("c@three.test")

		report1(c, report{"c@three.test", "delayed", "4.4.1", "connect timed out"})
		_, s := get(t, env, env.AdminKey, "/v1/sends/"+c.id)
		if got := recipients(s); got["c@three.test"] != "delivery_delayed" || s["status"] != "sent" {
			t.Fatalf("after a delay: status %v, recipients %v", s["status"], got)
		}
		report1(a, report{"A@One.test", "failed", "5.1.1", "550 5.1.1 no such user"}, report{"stranger@else.test", "failed", "5.1.1", ""})
		report1(bb, report{"b@two.test", "failed", "5.2.2", "552 5.2.2 mailbox full"})
		report1(c, report{"c@three.test", "delivered", "2.0.0", "250 ok"})
		for _, w := range []struct {
			s            sent
			rcpt, status string
		}{{a, "a@one.test", "bounced"}, {bb, "b@two.test", "bounced"}, {c, "c@three.test", "delivered"}} {
			if got := recipients(env.WaitStatus(t, w.s.id, wait, core.Status(w.status))); got[w.rcpt] != w.status {
				t.Errorf("%s: recipients %v, want %s", w.rcpt, got, w.status)
			}
		}
		if st, _ := get(t, env, env.AdminKey, "/v1/suppressions/a@one.test"); st != http.StatusOK {
			t.Errorf("5.1.1: suppression %d, want it listed", st)
		}
		if st, _ := get(t, env, env.AdminKey, "/v1/suppressions/b@two.test"); st != http.StatusNotFound {
			t.Errorf("5.2.2 (mailbox full): suppression %d, want none", st)
		}
		if st, _ := get(t, env, env.AdminKey, "/v1/suppressions/stranger@else.test"); st != http.StatusNotFound {
			t.Errorf("a recipient the send never had: suppression %d, want none", st)
		}

		if err := deliver(t, env.InboundAddr, c.verp, arfMail(c.verp, c.msgID, "c@three.test")); err != nil {
			t.Fatal(err)
		}
		s = env.WaitStatus(t, c.id, wait, core.StatusComplained)
		if got := events(s, core.EventComplained); len(got) != 1 || got[0] != "c@three.test" {
			t.Errorf("complained events %v", got)
		}
		if _, sup := get(t, env, env.AdminKey, "/v1/suppressions/c@three.test"); sup == nil || sup["origin"] != "complaint" {
			t.Errorf("complaint suppression %v, want origin complaint", sup)
		}
	})
}

// TestInbound_BadMail: a forged or altered token is refused at RCPT (550),
// an oversized message with 552; mail that is not a usable report is kept
// unmatched and answered 250, and a report about another tenant's send
// (through a valid token of one's own) touches nothing of that tenant.
func TestInbound_BadMail(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		id, _ := sendTo(t, env, env.AdminKey, sendoncetest.Mail("mine@rcpt.test", "mine"))
		env.WaitStatus(t, id, wait, core.StatusSent)
		verp := env.Server.Bounce.Address(id)
		local, domain, _ := strings.Cut(verp, "@")
		altered := []byte(local)
		if altered[len(altered)-1] == 'a' {
			altered[len(altered)-1] = 'b'
		} else {
			altered[len(altered)-1] = 'a'
		}

		for name, rcpt := range map[string]string{
			"altered":      string(altered) + "@" + domain,
			"no token":     "postmaster@" + domain,
			"other domain": local + "@elsewhere.test",
		} {
			if code := smtpCode(deliver(t, env.InboundAddr, rcpt, []byte("Subject: x\r\n\r\nx\r\n"))); code != 550 {
				t.Errorf("%s (%s): RCPT answered %d, want 550", name, rcpt, code)
			}
		}
		big := append([]byte("Subject: big\r\n\r\n"), bytes.Repeat([]byte(strings.Repeat("x", 998)+"\r\n"), 10700)...)
		if code := smtpCode(deliver(t, env.InboundAddr, verp, big)); code != 552 {
			t.Errorf("a message over 10 MiB: answered %d, want 552", code)
		}

		// Another tenant's send, and a report about it sent to our own token.
		_, otherKey := env.NewKey(t, app.NewKeyParams{Name: "other", Tenant: "other", Scopes: []core.Scope{core.ScopeSend, core.ScopeRead, core.ScopeAdmin}})
		theirs, theirMsgID := sendTo(t, env, otherKey, sendoncetest.Mail("victim@rcpt.test", "theirs"))
		for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
			if _, s := get(t, env, otherKey, "/v1/sends/"+theirs); s["status"] == "sent" {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("the other tenant's send: %v, want sent", s["status"])
			}
		}
		for _, raw := range [][]byte{
			[]byte("From: someone@else.test\r\nSubject: out of office\r\n\r\nI am away.\r\n"),
			dsnMail(verp, theirMsgID, report{"victim@rcpt.test", "failed", "5.1.1", ""}),
			dsnMail(verp, "", report{"victim@rcpt.test", "failed", "5.1.1", ""}),
		} {
			if err := deliver(t, env.InboundAddr, verp, raw); err != nil {
				t.Fatalf("unusable mail: %v, want 250", err)
			}
		}
		_, list := get(t, env, env.AdminKey, "/v1/inbound/unmatched")
		if data, _ := list["data"].([]any); len(data) != 3 {
			t.Fatalf("unmatched items %v, want 3", list)
		}
		_, s := get(t, env, otherKey, "/v1/sends/"+theirs)
		if s["status"] != "sent" || len(events(s, core.EventBounced)) != 0 {
			t.Errorf("the other tenant's send: %v, events %v; want it untouched", s["status"], s["events"])
		}
		if st, _ := get(t, env, otherKey, "/v1/suppressions/victim@rcpt.test"); st != http.StatusNotFound {
			t.Errorf("the other tenant's suppressions: %d, want none", st)
		}
		if _, l := get(t, env, otherKey, "/v1/inbound/unmatched"); len(l["data"].([]any)) != 0 {
			t.Errorf("the other tenant sees unmatched items %v", l)
		}
		_, s = get(t, env, env.AdminKey, "/v1/sends/"+id)
		if s["status"] != "sent" {
			t.Errorf("our send: %v, want sent", s["status"])
		}
	})
}
