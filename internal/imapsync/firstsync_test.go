package imapsync_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/dovecottest"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// A mailbox connected to its IMAP server — created with an imap URL, or
// given one later — starts its first sync at once in the process that
// connected it, not at the next scan of the connected mailboxes (here an
// hour away, so only the wake can explain a sync within the bound).
func TestConnectedMailbox_FirstSyncStartsAtOnce(t *testing.T) {
	d := dovecottest.Start(t, dovecottest.Options{})
	d.Deliver(t, "alice", "INBOX", []byte("From: carol@customer.test\r\nTo: alice@example.com\r\nSubject: waiting\r\n"+
		"Message-ID: <w1@customer.test>\r\nDate: "+time.Now().Format(time.RFC1123Z)+"\r\n\r\nHello\r\n"), time.Now())
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true, IMAPRescan: time.Hour})
	url := "imap://alice:secret@" + d.Addr + "?tls=none"
	for _, c := range []struct {
		name string
		req  sendoncetest.Request
	}{
		{"created with an imap URL", sendoncetest.Request{Method: http.MethodPost, Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: "mb-a",
			Body: map[string]any{"id": "a", "address": "alice@example.com", "imap": url}}},
		{"given one later", sendoncetest.Request{Method: http.MethodPut, Path: "/v1/mailboxes/b/imap", Key: env.AdminKey,
			Body: map[string]any{"imap": url}}},
	} {
		if c.name == "given one later" {
			if r := env.Do(t, sendoncetest.Request{Method: http.MethodPost, Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: "mb-b",
				Body: map[string]any{"id": "b", "address": "alice@example.com"}}); r.Status != http.StatusCreated {
				t.Fatalf("create b: %d %s", r.Status, r.Body)
			}
		}
		if r := env.Do(t, c.req); r.Status/100 != 2 {
			t.Fatalf("%s: %d %s", c.name, r.Status, r.Body)
		}
		mb := c.req.Body.(map[string]any)["id"]
		if mb == nil {
			mb = "b"
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			r := env.Do(t, sendoncetest.Request{Method: http.MethodGet, Path: "/v1/received?mailbox_id=" + mb.(string), Key: env.AdminKey})
			if len(r.JSON(t)["data"].([]any)) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: nothing synced within 15 s with the next scan an hour away", c.name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
