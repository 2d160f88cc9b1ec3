package httpapi_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestResendNodeSDKDrafts runs drafts.test.mjs: the SDK drafts a reply to
// a received message, edits, lists and reads it, and sends it with two
// presses at once; the relay gets one message, the edited one, threaded.
func TestResendNodeSDKDrafts(t *testing.T) {
	node := nodeBinary(t)
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true}, func(t *testing.T, env *sendoncetest.Env) {
		inbox := nodeInbox(t, env)
		svc := env.Server.Service
		if _, err := svc.Receive(context.Background(), app.Incoming{Tenant: "default", MailboxID: inbox, Source: "smtp",
			Raw: []byte(nodeReceivedMail)}); err != nil {
			t.Fatal(err)
		}
		runNodeTest(t, node, "drafts.test.mjs", env, "SENDONCE_INBOX="+inbox)

		list := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/drafts", Key: env.AdminKey}).JSON(t)["data"].([]any)
		if len(list) != 1 {
			t.Fatalf("%d drafts left, want the sent one", len(list))
		}
		sendID := list[0].(map[string]any)["send_id"].(string)
		env.WaitStatus(t, sendID, 20*time.Second, core.StatusSent)
		msgs := env.SMTP.Messages()
		if len(msgs) != 1 {
			t.Fatalf("the relay got %d messages, want 1", len(msgs))
		}
		for _, want := range []string{"In-Reply-To: <order-1234@customer.test>", "Subject: Re: Where is my order?", "Order 1234 ships today."} {
			if !bytes.Contains(msgs[0].Data, []byte(want)) {
				t.Errorf("the reply lacks %q:\n%s", want, msgs[0].Data)
			}
		}
	})
}
