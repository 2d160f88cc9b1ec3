package mxserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/tcpproxy"
)

// receive hands raw to the listener at addr from a sender, as an MTA.
func receive(t *testing.T, addr, rcpt string, raw []byte) error {
	t.Helper()
	return deliverFrom(t, addr, "alice@sender.test", rcpt, raw)
}

func createInbox(t *testing.T, env *sendoncetest.Env, address string) string {
	t.Helper()
	env.OwnDomain(t, "default", address)
	r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/inboxes", Key: env.AdminKey, IdemKey: app.NewID("k"),
		Body: map[string]any{"email_address": address, "name": "Support"}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create inbox: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)["id"].(string)
}

func receivedList(t *testing.T, env *sendoncetest.Env) []any {
	t.Helper()
	_, m := get(t, env, env.AdminKey, "/v1/received?limit=100")
	if m == nil {
		t.Fatal("list received failed")
	}
	return m["data"].([]any)
}

const plainMail = "From: Alice <alice@sender.test>\r\nTo: support@recv.test\r\nSubject: Help, please\r\n" +
	"Message-ID: <m1@sender.test>\r\nDate: Wed, 02 Dec 2026 05:00:00 +0000\r\nMIME-Version: 1.0\r\n" +
	"Content-Type: multipart/mixed; boundary=\"B\"\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\nMy order is late.\r\n" +
	"--B\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"invoice.pdf\"\r\n" +
	"Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--B--\r\n"

// TestReceiving_StoredOnceAndReadable: mail for an inbox's address is
// stored with its parsed view and attachment; any other recipient is 550;
// the same message delivered again is the same received message; the raw
// link works without a key and not with a wrong token.
func TestReceiving_StoredOnceAndReadable(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		inbox := createInbox(t, env, "support@recv.test")
		if err := receive(t, env.InboundAddr, "nobody@recv.test", []byte(plainMail)); smtpCode(err) != 550 {
			t.Fatalf("unknown recipient: %v, want 550", err)
		}
		for i := 0; i < 2; i++ {
			if err := receive(t, env.InboundAddr, "support@recv.test", []byte(plainMail)); err != nil {
				t.Fatalf("delivery %d: %v", i, err)
			}
		}
		list := receivedList(t, env)
		if len(list) != 1 {
			t.Fatalf("received %d messages, want 1", len(list))
		}
		id := list[0].(map[string]any)["id"].(string)
		_, m := get(t, env, env.AdminKey, "/v1/received/"+id)
		if m["subject"] != "Help, please" || m["mailbox_id"] != inbox || !strings.Contains(m["text"].(string), "order is late") {
			t.Fatalf("received message: %v", m)
		}
		atts := m["attachments"].([]any)
		if len(atts) != 1 || atts[0].(map[string]any)["filename"] != "invoice.pdf" {
			t.Fatalf("attachments: %v", atts)
		}
		r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/received/" + id + "/attachments/" + atts[0].(map[string]any)["id"].(string), Key: env.AdminKey})
		if r.Status != 200 || string(r.Body) != "%PDF-1.4\n" {
			t.Fatalf("attachment: %d %q", r.Status, r.Body)
		}
		_, rm := get(t, env, env.AdminKey, "/emails/receiving/"+id)
		url := rm["raw"].(map[string]any)["download_url"].(string)
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(raw) != plainMail {
			t.Fatalf("raw download: %d, %d bytes", resp.StatusCode, len(raw))
		}
		resp, err = http.Get(url[:len(url)-3] + "AAA")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Fatalf("a wrong token: %d, want 404", resp.StatusCode)
		}
	})
}

// TestReceiving_LostReplyIsOneMessage: a proxy swallows the listener's 250
// after the final dot, as a lost reply; the sender tries again through a
// clean path; one received message.
func TestReceiving_LostReplyIsOneMessage(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		createInbox(t, env, "support@recv.test")
		p, err := tcpproxy.Start(env.InboundAddr, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		p.DropReplies(1000)
		if err := receive(t, p.Addr, "support@recv.test", []byte(plainMail)); err == nil {
			t.Fatal("the reply was not dropped")
		}
		if p.Dropped() != 1 {
			t.Fatalf("dropped %d replies, want 1", p.Dropped())
		}
		if err := receive(t, env.InboundAddr, "support@recv.test", []byte(plainMail)); err != nil {
			t.Fatalf("retry: %v", err)
		}
		if n := len(receivedList(t, env)); n != 1 {
			t.Fatalf("received %d messages after a lost reply and a retry, want 1", n)
		}
	})
}

// TestReceiving_ReplyToASendJoinsItsThread: a reply naming a send in
// In-Reply-To is linked to it, and both are one thread; the send's
// history says replied; a reply from the API to that message joins the
// thread too, and the same Idempotency-Key twice sends one.
func TestReceiving_ReplyToASendJoinsItsThread(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		inbox := createInbox(t, env, "support@recv.test")
		sendID, msgID := sendTo(t, env, env.AdminKey, map[string]any{"mailbox_id": inbox, "to": []string{"alice@sender.test"},
			"subject": "Your order", "text": "shipped"})
		reply := "From: alice@sender.test\r\nTo: support@recv.test\r\nSubject: Re: Your order\r\nMessage-ID: <r1@sender.test>\r\n" +
			"In-Reply-To: " + msgID + "\r\nReferences: " + msgID + "\r\n\r\nThanks!\r\n"
		if err := receive(t, env.InboundAddr, "support@recv.test", []byte(reply)); err != nil {
			t.Fatal(err)
		}
		list := receivedList(t, env)
		if len(list) != 1 {
			t.Fatalf("received %d", len(list))
		}
		rm := list[0].(map[string]any)
		if rm["send_id"] != sendID {
			t.Fatalf("send_id %v, want %s", rm["send_id"], sendID)
		}
		_, s := get(t, env, env.AdminKey, "/v1/sends/"+sendID)
		if len(events(s, "replied")) != 1 {
			t.Fatalf("the send's history has no replied entry: %v", s["events"])
		}
		thread := rm["thread_id"].(string)
		key := app.NewID("k")
		var ids []string
		for i := 0; i < 2; i++ {
			r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/inboxes/" + inbox + "/threads/" + thread + "/emails/" + rm["id"].(string) + "/reply",
				Key: env.AdminKey, IdemKey: key, Body: map[string]any{"text": "You are welcome."}})
			if r.Status != 200 {
				t.Fatalf("reply: %d %s", r.Status, r.Body)
			}
			ids = append(ids, r.JSON(t)["id"].(string))
		}
		if ids[0] != ids[1] {
			t.Fatalf("the same key made two replies: %v", ids)
		}
		_, th := get(t, env, env.AdminKey, "/v1/threads/"+thread)
		msgs := th["messages"].([]any)
		if len(msgs) != 3 {
			t.Fatalf("thread has %d messages, want the send, the reply and our answer: %v", len(msgs), msgs)
		}
		last := msgs[2].(map[string]any)
		if last["id"] != ids[0] || last["direction"] != "outbound" || last["subject"] != "Re: Your order" {
			t.Fatalf("our answer: %v", last)
		}
	})
}

// TestReceiving_WebhookOncePerMessage: an endpoint subscribed to
// email.received gets one signed delivery per received message, with
// Resend's metadata payload, and none for the second delivery of it.
func TestReceiving_WebhookOncePerMessage(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		var mu sync.Mutex
		var bodies [][]byte
		ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			if r.Header.Get("webhook-signature") == "" {
				w.WriteHeader(400)
				return
			}
			mu.Lock()
			bodies = append(bodies, b)
			mu.Unlock()
			w.WriteHeader(204)
		}))
		defer ep.Close()
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, SMTP: true, Inbound: true, WebhookAllowPrivate: true})
		inbox := createInbox(t, env, "support@recv.test")
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/webhooks", Key: env.AdminKey, IdemKey: "wh",
			Body: map[string]any{"endpoint": ep.URL, "events": []string{"email.received"}}})
		if r.Status != http.StatusCreated {
			t.Fatalf("create webhook: %d %s", r.Status, r.Body)
		}
		for i := 0; i < 2; i++ {
			if err := receive(t, env.InboundAddr, "support@recv.test", []byte(plainMail)); err != nil {
				t.Fatal(err)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			n := len(bodies)
			mu.Unlock()
			if n > 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond) // room for a second delivery that must not come
		mu.Lock()
		defer mu.Unlock()
		if len(bodies) != 1 {
			t.Fatalf("endpoint got %d deliveries, want 1", len(bodies))
		}
		var m map[string]any
		if err := json.Unmarshal(bodies[0], &m); err != nil {
			t.Fatal(err)
		}
		data := m["data"].(map[string]any)
		id := receivedList(t, env)[0].(map[string]any)["id"]
		if m["type"] != "email.received" || data["email_id"] != id || data["subject"] != "Help, please" || data["inbox_id"] != inbox {
			t.Fatalf("payload: %s", bodies[0])
		}
		if _, ok := data["text"]; ok {
			t.Fatalf("the payload carries the body; Resend's has metadata only: %s", bodies[0])
		}
	})
}

// TestReceiving_MaileraMailbox: a mailbox created with receiving: true
// takes mail at its address; the Mailera routes list and read it; mode
// reply with reply_to_id answers the sender with the thread's headers; a
// key limited to another mailbox sees none of it.
func TestReceiving_MaileraMailbox(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		env.OwnDomain(t, "default", "recv.test")
		for _, mb := range []map[string]any{{"id": "sales", "address": "sales@recv.test", "receiving": true}, {"id": "other", "address": "other@recv.test"}} {
			if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: app.NewID("k"), Body: mb}); r.Status != http.StatusCreated {
				t.Fatalf("mailbox: %d %s", r.Status, r.Body)
			}
		}
		if err := receive(t, env.InboundAddr, "other@recv.test", []byte(plainMail)); smtpCode(err) != 550 {
			t.Fatalf("a mailbox not marked receiving took mail: %v", err)
		}
		if err := receive(t, env.InboundAddr, "sales@recv.test", []byte(plainMail)); err != nil {
			t.Fatal(err)
		}
		_, list := get(t, env, env.AdminKey, "/api/public/v1/mailboxes/sales/messages")
		data := list["data"].([]any)
		if len(data) != 1 {
			t.Fatalf("mailbox messages: %v", list)
		}
		id := data[0].(map[string]any)["id"].(string)
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/api/public/v1/mailboxes/sales/send", Key: env.AdminKey, IdemKey: app.NewID("k"),
			Body: map[string]any{"mode": "reply", "reply_to_id": id, "text": "On its way."}})
		if r.Status != http.StatusOK {
			t.Fatalf("reply: %d %s", r.Status, r.Body)
		}
		sendID := r.JSON(t)["id"].(string)
		s := env.WaitStatus(t, sendID, 15*time.Second, "sent")
		if to := s["to"].([]any); len(to) != 1 || !strings.Contains(to[0].(string), "alice@sender.test") || s["subject"] != "Re: Help, please" {
			t.Fatalf("reply send: %v", s)
		}
		var got string
		for _, m := range env.SMTP.Messages() {
			if strings.Contains(string(m.Data), "Re: Help, please") {
				got = string(m.Data)
			}
		}
		if !strings.Contains(got, "In-Reply-To: <m1@sender.test>") {
			t.Fatalf("the relay's copy has no In-Reply-To:\n%s", got)
		}
		_, limited := env.NewKey(t, app.NewKeyParams{Name: "other-only", Scopes: []core.Scope{core.ScopeRead, core.ScopeSend}, Mailboxes: []string{"other"}})
		if st, _ := get(t, env, limited, "/v1/received/"+id); st != http.StatusNotFound {
			t.Fatalf("a key of another mailbox read the message: %d", st)
		}
		if _, l := get(t, env, limited, "/v1/received"); len(l["data"].([]any)) != 0 {
			t.Fatalf("a key of another mailbox listed: %v", l)
		}
	})
}

// TestReceiving_DomainCatchAll: a domain added with receiving and a
// catch-all mailbox publishes an MX and takes mail for any of its
// addresses into that mailbox; a receiving domain without one refuses
// unknown addresses with 550.
func TestReceiving_DomainCatchAll(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/mailboxes", Key: env.AdminKey, IdemKey: "mb",
			Body: map[string]any{"id": "catch", "address": "catch@all.test"}}); r.Status != http.StatusCreated {
			t.Fatalf("mailbox: %d %s", r.Status, r.Body)
		}
		r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/domains", Key: env.AdminKey, IdemKey: "d1",
			Body: map[string]any{"domain": "all.test", "receiving": true, "catch_all": "catch"}})
		if r.Status != http.StatusCreated {
			t.Fatalf("domain: %d %s", r.Status, r.Body)
		}
		var mx bool
		for _, rec := range r.JSON(t)["records"].([]any) {
			if m := rec.(map[string]any); m["type"] == "MX" && m["name"] == "all.test" {
				mx = true
			}
		}
		if !mx {
			t.Fatalf("a receiving domain's records have no MX: %s", r.Body)
		}
		if r := env.Do(t, sendoncetest.Request{Method: "POST", Path: "/v1/domains", Key: env.AdminKey, IdemKey: "d2",
			Body: map[string]any{"domain": "strict.test", "receiving": true}}); r.Status != http.StatusCreated {
			t.Fatalf("domain: %d %s", r.Status, r.Body)
		}
		if err := receive(t, env.InboundAddr, "anyone@strict.test", []byte(plainMail)); smtpCode(err) != 550 {
			t.Fatalf("a receiving domain without a catch-all took an unknown address: %v", err)
		}
		if err := receive(t, env.InboundAddr, "whoever@all.test", []byte(plainMail)); err != nil {
			t.Fatalf("catch-all: %v", err)
		}
		list := receivedList(t, env)
		if len(list) != 1 || list[0].(map[string]any)["mailbox_id"] != "catch" {
			t.Fatalf("received: %v", list)
		}
	})
}

// TestReceiving_RetentionPurgesWhatOnlyItUsed: the retention purge takes
// received mail past the cutoff with its raw bytes and emptied thread.
func TestReceiving_RetentionPurgesWhatOnlyItUsed(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		createInbox(t, env, "support@recv.test")
		if err := receive(t, env.InboundAddr, "support@recv.test", []byte(plainMail)); err != nil {
			t.Fatal(err)
		}
		for _, table := range []string{"received_messages", "received_raw", "threads", "thread_messages"} {
			if n := env.QueryInt(t, "SELECT count(*) FROM "+table); n != 1 {
				t.Fatalf("%s has %d rows before the purge", table, n)
			}
		}
		if _, err := env.Server.Store.PurgeSends(context.Background(), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		for _, table := range []string{"received_messages", "received_raw", "threads", "thread_messages"} {
			if n := env.QueryInt(t, "SELECT count(*) FROM "+table); n != 0 {
				t.Errorf("%s keeps %d rows past the retention", table, n)
			}
		}
	})
}
