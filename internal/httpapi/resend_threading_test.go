package httpapi_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestResendEmails_ReplyHeaders: Resend's documented way to reply in a
// thread — In-Reply-To (and References) in `headers` — is taken, not
// refused as a reserved header, and so is the sender's own Message-ID;
// the delivered message carries them; one that is not a Message-ID is a
// 422 naming the field.
func TestResendEmails_ReplyHeaders(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true})
	r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/emails", Key: env.AdminKey, IdemKey: "reply-1",
		Body: map[string]any{"from": "sender@example.com", "to": "ann@rcpt.test", "subject": "Re: order", "text": "On its way.",
			"headers": map[string]string{"In-Reply-To": "<q1@rcpt.test>", "references": "<q0@rcpt.test> <q1@rcpt.test>", "X-Ref": "7",
				"Message-ID": "<own-1@sender.example>"}}})
	if r.Status != http.StatusOK {
		t.Fatalf("reply with In-Reply-To in headers: %d %s", r.Status, r.Body)
	}
	id := r.JSON(t)["id"].(string)
	s := env.WaitStatus(t, id, 10*time.Second, core.StatusSent, core.StatusFailed)
	if s["status"] != "sent" {
		t.Fatalf("%v", s)
	}
	raw := env.SMTP.Messages()[0].Data
	for _, want := range []string{"In-Reply-To: <q1@rcpt.test>", "References: <q0@rcpt.test> <q1@rcpt.test>", "X-Ref: 7",
		"Message-ID: <own-1@sender.example>"} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("the message lacks %q:\n%s", want, raw)
		}
	}
	bad := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/emails", Key: env.AdminKey, IdemKey: "reply-2",
		Body: map[string]any{"from": "sender@example.com", "to": "ann@rcpt.test", "subject": "Re: x", "text": "x",
			"headers": map[string]string{"In-Reply-To": "not a message id"}}})
	if bad.Status != http.StatusUnprocessableEntity || !bytes.Contains(bad.Body, []byte("in_reply_to")) {
		t.Errorf("a bad In-Reply-To: %d %s, want 422 naming in_reply_to", bad.Status, bad.Body)
	}
}
