package delivery_test

import (
	"slices"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dnstest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestMX_PerRecipientOutcomes: under --transport mx the recipients' own
// servers decide per recipient. A 5xx to one RCPT bounces that recipient
// (and suppresses it for 5.1.1) while the others get the message; a 5xx
// to every recipient bounces the send.
func TestMX_PerRecipientOutcomes(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, backend sendoncetest.Backend) {
		dns := dnstest.Start(t,
			"rcpt.test. MX 10 mx1.rcpt.test.", "mx1.rcpt.test. A 127.0.0.1",
			"other.test. MX 10 mx1.other.test.", "mx1.other.test. A 127.0.0.1",
		)
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: backend, MX: true, RetryBase: retryBase, DNSResolver: dns.Addr()})
		gone := &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
		full := &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 2, 2}, Message: "mailbox full"}
		env.SMTP.SetBehaviour(smtptest.Behaviour{RcptErrFor: map[string]*smtp.SMTPError{"gone@rcpt.test": gone, "full@other.test": full}})

		id := send(t, env, map[string]any{"to": []string{"ann@rcpt.test", "gone@rcpt.test"}, "cc": "full@other.test", "subject": "mixed", "text": "x"})
		s := env.WaitStatus(t, id, waitLong, core.StatusDelivered)
		checkRecipients(t, s, map[string]string{"ann@rcpt.test": "delivered", "gone@rcpt.test": "bounced", "full@other.test": "bounced"})
		msgs := env.SMTP.Messages()
		if len(msgs) != 1 || !slices.Equal(msgs[0].To, []string{"ann@rcpt.test"}) {
			t.Fatalf("exchanger got %+v, want one message to ann@ only", msgs)
		}
		if n := env.QueryInt(t, `SELECT count(*) FROM suppressions WHERE address = 'gone@rcpt.test' AND origin = 'bounce'`); n != 1 {
			t.Errorf("5.1.1: %d suppressions, want 1", n)
		}
		if n := env.QueryInt(t, `SELECT count(*) FROM suppressions WHERE address = 'full@other.test'`); n != 0 {
			t.Errorf("5.2.2: %d suppressions, want none", n)
		}
		ev := eventTypes(s)
		if countOf(ev, core.EventBounced) != 2 || countOf(ev, core.EventDelivered) != 1 || countOf(ev, "sent") != 1 {
			t.Errorf("events %v, want sent, delivered and two bounced", ev)
		}

		id = send(t, env, map[string]any{"to": "full@other.test", "subject": "refused", "text": "x"})
		s = env.WaitStatus(t, id, waitLong, core.StatusBounced)
		if ev := eventTypes(s); countOf(ev, core.EventBounced) != 1 || slices.Contains(ev, core.EventFailed) {
			t.Errorf("all refused: events %v, want one bounced and no failed", ev)
		}
	})
}
