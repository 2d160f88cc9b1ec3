package mxserver_test

import (
	"net/http"
	"testing"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestInbound_RecipientCannotReportACoRecipient: a recipient of a send
// reads the bounce address in its copy's Return-Path. Of a send whose
// transaction carried several recipients (the relay takes them in one),
// that address is shared, so a report to it — here recipient a's forged
// 5.1.1 for its co-recipient b — changes nothing and is kept unmatched.
// An address bound to one recipient speaks for that recipient only: a
// report to a's naming b changes nothing, naming a bounces a.
func TestInbound_RecipientCannotReportACoRecipient(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		id, msgID := sendTo(t, env, env.AdminKey, map[string]any{"to": []string{"a@one.test", "b@two.test"}, "subject": "two", "text": "x"})
		env.WaitStatus(t, id, wait, core.StatusSent)
		shared := env.Server.Bounce.Address(id)
		if msgs := env.SMTP.Messages(); len(msgs) != 1 || msgs[0].From != shared {
			t.Fatalf("relay got %d messages; want one transaction from the send's shared address %q", len(msgs), shared)
		}
		forged := report{"b@two.test", "failed", "5.1.1", "550 5.1.1 no such user"}
		if err := deliver(t, env.InboundAddr, shared, dsnMail(shared, msgID, forged)); err != nil {
			t.Fatalf("deliver the forged report: %v", err)
		}
		aOwn := env.Server.Bounce.RecipientAddress(id, 0)
		if err := deliver(t, env.InboundAddr, aOwn, dsnMail(aOwn, msgID, forged)); err != nil {
			t.Fatalf("deliver the forged report to a's own address: %v", err)
		}
		_, s := get(t, env, env.AdminKey, "/v1/sends/"+id)
		if got := recipients(s); got["b@two.test"] != "sent" {
			t.Errorf("b after forged reports: %q, want sent", got["b@two.test"])
		}
		if st, _ := get(t, env, env.AdminKey, "/v1/suppressions/b@two.test"); st != http.StatusNotFound {
			t.Errorf("b: suppression %d, want none", st)
		}
		if n := env.QueryInt(t, `SELECT count(*) FROM inbound_unmatched WHERE send_id = ?`, id); n != 2 {
			t.Errorf("%d unmatched items kept for the send, want the 2 reports", n)
		}

		own := report{"a@one.test", "failed", "5.1.1", "550 5.1.1 no such user"}
		if err := deliver(t, env.InboundAddr, aOwn, dsnMail(aOwn, msgID, own)); err != nil {
			t.Fatal(err)
		}
		_, s = get(t, env, env.AdminKey, "/v1/sends/"+id)
		if got := recipients(s); got["a@one.test"] != "bounced" || got["b@two.test"] != "sent" {
			t.Errorf("after a's own report: %v, want a bounced and b sent", got)
		}
	})
}
