package imapsync_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
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
		// The syncer reconnects and hands the folder over again: its state
		// names the new UIDVALIDITY with the last UID once every message
		// of the pass was handed over.
		for deadline := time.Now().Add(20 * time.Second); env.QueryInt(t,
			`SELECT count(*) FROM imap_sync WHERE mailbox_id = 'support' AND uid_validity = 777 AND last_uid >= 3`) != 1; {
			if time.Now().After(deadline) {
				t.Fatal("the resync after a UIDVALIDITY change did not finish within 20 s")
			}
			time.Sleep(50 * time.Millisecond)
		}
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

// TestConnectedMailbox_DisconnectedWebhook: a connected mailbox whose
// password is wrong pauses and tells the tenant's webhook once
// (mailbox.disconnected, with a class); the right password through the
// API resumes it (mailbox.connected).
func TestConnectedMailbox_DisconnectedWebhook(t *testing.T) {
	d := dovecottest.Start(t, dovecottest.Options{})
	var mu sync.Mutex
	var types []string
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p struct {
			Type string `json:"type"`
			Data struct {
				Reason string `json:"reason"`
			} `json:"data"`
		}
		_ = json.NewDecoder(r.Body).Decode(&p)
		mu.Lock()
		types = append(types, p.Type+"/"+p.Data.Reason)
		mu.Unlock()
		w.WriteHeader(204)
	}))
	defer ep.Close()
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true, WebhookAllowPrivate: true})
	if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/webhooks", Key: env.AdminKey, IdemKey: "wh",
		Body: map[string]any{"endpoint": ep.URL, "events": []string{"mailbox.disconnected", "mailbox.connected"}}}); r.Status != http.StatusCreated {
		t.Fatalf("webhook: %d %s", r.Status, r.Body)
	}
	if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: "mb",
		Body: map[string]any{"id": "support", "address": "alice@example.com", "imap": "imap://alice:wrong@" + d.Addr + "?tls=none"}}); r.Status != http.StatusCreated {
		t.Fatalf("connect: %d %s", r.Status, r.Body)
	}
	got := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(types)
	}
	wait := func(n int) []string {
		for deadline := time.Now().Add(20 * time.Second); len(got()) < n && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
		}
		return got()
	}
	if g := wait(1); len(g) != 1 || !strings.HasPrefix(g[0], "mailbox.disconnected/") || strings.HasSuffix(g[0], "/") {
		t.Fatalf("after a wrong password: %v, want one mailbox.disconnected with a reason", g)
	}
	time.Sleep(3 * time.Second) // retries with backoff: no second event
	if g := got(); len(g) != 1 {
		t.Fatalf("retries repeated the event: %v", g)
	}
	if r := env.Do(t, sendoncetest.Request{Method: "PUT", Path: "/v1/mailboxes/support/imap", Key: env.AdminKey,
		Body: map[string]any{"imap": "imap://alice:secret@" + d.Addr + "?tls=none"}}); r.Status != http.StatusOK {
		t.Fatalf("fix the password: %d %s", r.Status, r.Body)
	}
	if g := wait(2); len(g) != 2 || g[1] != "mailbox.connected/" {
		t.Fatalf("after the right password: %v, want mailbox.connected", g)
	}
}
