package mxserver_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestReceiving_StrangersHeadersDoNotBreakReplies: a received Subject
// whose encoded word decodes to CR LF, and a Reply-To that is no address,
// are what a stranger writes; replying still works: the subject is kept
// on one line and the reply goes to the From.
func TestReceiving_StrangersHeadersDoNotBreakReplies(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		createInbox(t, env, "support@recv.test")
		raw := "From: Alice <alice@sender.test>\r\nTo: support@recv.test\r\nReply-To: <<not an address\r\n" +
			"Subject: =?utf-8?q?Order=0D=0ABcc:_evil@x.test?=\r\nMessage-ID: <l5@sender.test>\r\n\r\nWhere is it?\r\n"
		if err := receive(t, env.InboundAddr, "support@recv.test", []byte(raw)); err != nil {
			t.Fatal(err)
		}
		list := receivedList(t, env)
		if len(list) != 1 {
			t.Fatalf("received %d messages, want 1", len(list))
		}
		id := list[0].(map[string]any)["id"].(string)
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/received/" + id + "/reply", Key: env.AdminKey,
			IdemKey: app.NewID("k"), Body: map[string]any{"text": "On its way."}})
		if r.Status != http.StatusOK {
			t.Fatalf("reply: %d %s, want 200", r.Status, r.Body)
		}
		_, s := get(t, env, env.AdminKey, "/v1/sends/"+r.JSON(t)["id"].(string))
		subject, _ := s["subject"].(string)
		if strings.ContainsAny(subject, "\r\n") || !strings.HasPrefix(subject, "Re: Order") {
			t.Fatalf("reply subject %q, want one line starting Re: Order", subject)
		}
		if got := recipients(s); len(got) != 1 || got["alice@sender.test"] == "" {
			t.Fatalf("reply recipients %v, want the From alone", got)
		}
	})
}
