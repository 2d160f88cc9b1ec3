package imapsync_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/dovecottest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestConnectedMailbox_EndToEnd: a running sendonce with a mailbox
// connected to a real Dovecot. Its inbox arrives as received messages,
// each once; one delivered while the syncer idles appears within
// seconds; a UIDVALIDITY change adds nothing; a reply sent through the
// API lands in Dovecot's Sent folder once.
func TestConnectedMailbox_EndToEnd(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		d := dovecottest.Start(t, dovecottest.Options{})
		mail := func(id, subject string) []byte {
			return []byte("From: Carol <carol@customer.test>\r\nTo: alice@example.com\r\nSubject: " + subject +
				"\r\nMessage-ID: " + id + "\r\nDate: " + time.Now().Format(time.RFC1123Z) + "\r\n\r\nHello, " + subject + "\r\n")
		}
		d.Deliver(t, "alice", "INBOX", mail("<c1@customer.test>", "first"), time.Now().Add(-time.Hour))
		d.Deliver(t, "alice", "INBOX", mail("<c2@customer.test>", "second"), time.Now().Add(-time.Minute))
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, SMTP: true})
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: "mb",
			Body: map[string]any{"id": "support", "address": "alice@example.com", "imap": "imap://alice:secret@" + d.Addr + "?tls=none"}}); r.Status != http.StatusCreated {
			t.Fatalf("connect: %d %s", r.Status, r.Body)
		}
		received := func() []any {
			r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/received?mailbox_id=support&limit=100", Key: env.AdminKey})
			return r.JSON(t)["data"].([]any)
		}
		waitFor := func(n int, within time.Duration) []any {
			deadline := time.Now().Add(within)
			for {
				got := received()
				if len(got) >= n || time.Now().After(deadline) {
					return got
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		if got := waitFor(2, 20*time.Second); len(got) != 2 {
			t.Fatalf("initial sync: %d received, want 2", len(got))
		}
		d.Deliver(t, "alice", "INBOX", mail("<c3@customer.test>", "third"), time.Now())
		if got := waitFor(3, 10*time.Second); len(got) != 3 {
			t.Fatalf("a message delivered while idle: %d received after 10 s, want 3", len(got))
		}
		d.SetUIDValidity(t, "alice", "INBOX", 777)
		d.Kick(t, "alice")
		time.Sleep(3 * time.Second) // the syncer reconnects and resynchronises
		if got := received(); len(got) != 3 {
			t.Fatalf("after a UIDVALIDITY change: %d received, want still 3", len(got))
		}
		var first map[string]any
		for _, m := range received() {
			if m.(map[string]any)["message_id"] == "<c1@customer.test>" {
				first = m.(map[string]any)
			}
		}
		if first == nil || first["source"] != "imap" {
			t.Fatalf("the first message: %v", first)
		}
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/received/" + first["id"].(string) + "/reply",
			Key: env.AdminKey, IdemKey: app.NewID("k"), Body: map[string]any{"text": "Thanks, Carol."}})
		if r.Status != http.StatusOK {
			t.Fatalf("reply: %d %s", r.Status, r.Body)
		}
		reply := r.JSON(t)
		env.WaitStatus(t, reply["id"].(string), 15*time.Second, core.StatusSent)
		msgID := reply["message_id"].(string)
		deadline := time.Now().Add(15 * time.Second)
		var sent []string
		for time.Now().Before(deadline) {
			if sent = d.MessageIDs(t, "alice", "Sent"); slices.Contains(sent, msgID) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond)
		n := 0
		for _, id := range d.MessageIDs(t, "alice", "Sent") {
			if strings.EqualFold(id, msgID) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("the reply is in Sent %d times, want once (Sent: %v)", n, sent)
		}
	})
}
