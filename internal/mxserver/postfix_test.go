package mxserver_test

import (
	"net/http"
	netsmtp "net/smtp"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/postfixtest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestInbound_PostfixBounce: a real MTA's own DSN. Postfix is the relay;
// it accepts the message, then the recipient's server (a go-smtp server)
// refuses the recipient with 550 5.1.1, and Postfix's bounce daemon mails
// its DSN to the send's VERP address, which Postfix routes to sendonce's
// inbound listener: email.bounced, status bounced, and a suppression.
func TestInbound_PostfixBounce(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		mx := smtptest.Start(t, smtptest.Options{})
		mx.SetBehaviour(smtptest.Behaviour{RcptErr: &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1},
			Message: "<gone@rcpt.test>: Recipient address rejected: User unknown"}})
		relay := postfixtest.FreeAddr(t)
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, Inbound: true, Transport: "smtp://" + relay + "?tls=none"})
		pf := postfixtest.Start(t, relay, postfixtest.Options{Routes: map[string]string{
			"rcpt.test":            mx.Addr,
			"bounces.example.test": env.InboundAddr,
		}})

		id, _ := sendTo(t, env, env.AdminKey, sendoncetest.Mail("Gone <gone@rcpt.test>", "to a mailbox that is gone"))
		s := env.WaitStatus(t, id, 30*time.Second, core.StatusBounced)
		// Postfix took it (250: sent) before its DSN came back; the two can
		// follow within milliseconds, so the history says it, not a status
		// caught in between.
		if len(events(s, core.EventSent)) != 1 {
			t.Fatalf("history %v: want one sent (Postfix's 250) before the bounce\n%s", s["events"], pf.Log())
		}
		if got := events(s, core.EventBounced); len(got) != 1 || got[0] != "gone@rcpt.test" {
			t.Fatalf("bounced events %v, want one for gone@rcpt.test\n%s", got, pf.Log())
		}
		var detail string
		for _, r := range s["recipients"].([]any) {
			m := r.(map[string]any)
			if m["email"] == "gone@rcpt.test" {
				detail, _ = m["detail"].(string)
			}
		}
		if !strings.HasPrefix(detail, "5.1.1") || !strings.Contains(detail, "User unknown") {
			t.Errorf("recipient detail %q, want Postfix's 5.1.1 with the remote server's words", detail)
		}
		st, sup := get(t, env, env.AdminKey, "/v1/suppressions/gone@rcpt.test")
		if st != http.StatusOK || sup["origin"] != "bounce" || sup["send_id"] != id {
			t.Fatalf("suppression: %d %v", st, sup)
		}
		if !strings.Contains(pf.Log(), "status=bounced") {
			t.Errorf("Postfix's log has no bounce:\n%s", pf.Log())
		}
	})
}

// TestReceiving_FromPostfix: a real MTA delivers to a receiving address.
// Postfix takes a message for support@recv.test and relays it to
// sendonce's inbound listener as it would to any MX; the message, its
// attachment and the receiving side's Authentication-Results are there
// through the API, once.
func TestReceiving_FromPostfix(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		createInbox(t, env, "support@recv.test")
		pf := postfixtest.Start(t, "", postfixtest.Options{Routes: map[string]string{"recv.test": env.InboundAddr}})
		if err := netsmtp.SendMail(pf.Addr, nil, "alice@sender.test", []string{"support@recv.test"}, []byte(plainMail)); err != nil {
			t.Fatalf("submit to postfix: %v", err)
		}
		deadline := time.Now().Add(30 * time.Second)
		var list []any
		for time.Now().Before(deadline) {
			if list = receivedList(t, env); len(list) > 0 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if len(list) != 1 {
			t.Fatalf("received %d messages through postfix, want 1\n%s", len(list), pf.Log())
		}
		_, m := get(t, env, env.AdminKey, "/v1/received/"+list[0].(map[string]any)["id"].(string))
		if m["subject"] != "Help, please" || len(m["attachments"].([]any)) != 1 || m["mail_from"] != "alice@sender.test" {
			t.Fatalf("received through postfix: %v", m)
		}
		auth := m["authentication"].(map[string]any)
		hdrs := m["headers"].([]any)
		first := hdrs[0].(map[string]any)
		if auth["spf"] == "" || first["name"] != "Authentication-Results" || !strings.Contains(first["value"].(string), "spf=") {
			t.Fatalf("authentication %v, first header %v", auth, first)
		}
		if !strings.Contains(pf.Log(), "status=sent") {
			t.Errorf("postfix's log has no delivery:\n%s", pf.Log())
		}
	})
}
