package httpapi_test

import (
	"net/http"
	"net/smtp"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

const nodeReceivedMail = "From: Grace <grace@customer.test>\r\nTo: help@node.test\r\nSubject: Where is my order?\r\n" +
	"Message-ID: <order-1234@customer.test>\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"B\"\r\n\r\n" +
	"--B\r\nContent-Type: text/plain\r\n\r\nWhere is order 1234?\r\n" +
	"--B\r\nContent-Type: text/plain; name=receipt.txt\r\nContent-Disposition: attachment; filename=receipt.txt\r\n\r\npaid in full\n\r\n--B--\r\n"

// nodeInbox gives the tenant the domain node.test and, through Resend's
// POST /inboxes, the inbox help@node.test the node scripts read; its id.
func nodeInbox(t *testing.T, env *sendoncetest.Env) string {
	t.Helper()
	env.OwnDomain(t, "default", "node.test")
	r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/inboxes", Key: env.AdminKey, IdemKey: "inbox-node",
		Body: map[string]any{"email_address": "help@node.test", "name": "Help"}})
	if r.Status != http.StatusCreated {
		t.Fatalf("inbox: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)["id"].(string)
}

// TestResendNodeSDKReceiving runs receiving.test.mjs: a message received
// over SMTP, read through the SDK's emails.receiving and inboxes calls; the
// SDK's reply with one Idempotency-Key twice reaches the relay once.
func TestResendNodeSDKReceiving(t *testing.T) {
	node := nodeBinary(t)
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		inbox := nodeInbox(t, env)
		if err := smtp.SendMail(env.InboundAddr, nil, "grace@customer.test", []string{"help@node.test"}, []byte(nodeReceivedMail)); err != nil {
			t.Fatalf("deliver to the listener: %v", err)
		}
		runNodeTest(t, node, "receiving.test.mjs", env, "SENDONCE_INBOX="+inbox, "SENDONCE_INBOX_ADDRESS=help@node.test")
		deadline := time.Now().Add(15 * time.Second)
		var replies int
		for time.Now().Before(deadline) {
			replies = 0
			for _, m := range env.SMTP.Messages() {
				if strings.Contains(string(m.Data), "Subject: Re: Where is my order?") {
					replies++
				}
			}
			if replies > 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		replies = 0
		for _, m := range env.SMTP.Messages() {
			if strings.Contains(string(m.Data), "Subject: Re: Where is my order?") {
				replies++
			}
		}
		if replies != 1 {
			t.Fatalf("the relay got %d replies, want 1", replies)
		}
	})
}
