package mxserver_test

import (
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// deliverForReply hands raw to the listener and returns the 250's text.
func deliverForReply(t *testing.T, addr, rcpt string, raw []byte) string {
	t.Helper()
	text, err := deliverReply(t, addr, "alice@sender.test", rcpt, raw)
	if err != nil {
		t.Fatalf("DATA: %v", err)
	}
	return text
}

// The 250 to a received message names it (rcv_…), so a sender's log line
// (Postfix's "status=sent (250 …)") can be matched to what was stored; the
// same message delivered again names the same one.
func TestReceiving_The250NamesTheReceivedMessage(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		createInbox(t, env, "support@recv.test")
		first := deliverForReply(t, env.InboundAddr, "support@recv.test", []byte(plainMail))
		list := receivedList(t, env)
		if len(list) != 1 {
			t.Fatalf("%d received, want 1", len(list))
		}
		id := list[0].(map[string]any)["id"].(string)
		if !strings.Contains(first, "received as "+id) {
			t.Fatalf("the 250 says %q, want it to name %s", first, id)
		}
		if again := deliverForReply(t, env.InboundAddr, "support@recv.test", []byte(plainMail)); !strings.Contains(again, "received as "+id) {
			t.Fatalf("the redelivery's 250 says %q, want the same %s", again, id)
		}
	})
}
