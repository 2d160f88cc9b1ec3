package submission_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/tcpproxy"
)

// TestSubmission_SendIsFoundByIDAndDeliveredOnce: go-smtp's client
// authenticates with an API key and submits a message; the 250 names a
// send that GET /v1/sends/{id} finds, the relay receives the message byte
// for byte once, and the same message again (same Message-ID) is answered
// with the same send and not sent again.
func TestSubmission_SendIsFoundByIDAndDeliveredOnce(t *testing.T) {
	eachEnv(t, func(t *testing.T, env *sendoncetest.Env, addr string) {
		c := dial(t, addr, env.AdminKey)
		msgID := newMsgID()
		data := mail(msgID, "Hello over SMTP.")
		text, err := submit(c, "sender@example.com", []string{"ann@example.com", "bob@example.net"}, data)
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		id := sendID(t, text)
		if !strings.Contains(text, "queued as "+id) {
			t.Errorf("250 text %q", text)
		}
		r := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/v1/sends/" + id, Key: env.AdminKey})
		if r.Status != http.StatusOK {
			t.Fatalf("GET /v1/sends/%s: %d %s", id, r.Status, r.Body)
		}
		if v := r.JSON(t); v["subject"] != "Hello" || v["message_id"] != msgID {
			t.Errorf("send view = %v, want subject Hello and message_id %s", v, msgID)
		}
		delivered(t, env, id)

		again, err := submit(c, "sender@example.com", []string{"ann@example.com", "bob@example.net"}, data)
		if err != nil {
			t.Fatalf("resubmit: %v", err)
		}
		if got := sendID(t, again); got != id || !strings.Contains(again, "not sent again") {
			t.Errorf("resubmission answered %q, want the first send %s, replayed", again, id)
		}
		if n := sendsOf(t, env, strings.Trim(msgID, "<>")); n != 1 {
			t.Errorf("%d sends under the Message-ID, want 1", n)
		}
		for name, got := range map[string]float64{
			`sendonce_smtp_messages_total{outcome="accepted"}`: counter(t, env, "sendonce_smtp_messages_total", "accepted"),
			`sendonce_smtp_messages_total{outcome="replayed"}`: counter(t, env, "sendonce_smtp_messages_total", "replayed"),
			"sendonce_smtp_sessions_total":                     counter(t, env, "sendonce_smtp_sessions_total", ""),
			`sendonce_duplicates_prevented_total{via="smtp"}`:  counter(t, env, "sendonce_duplicates_prevented_total", "smtp"),
		} {
			if got != 1 {
				t.Errorf("metric %s = %v, want 1", name, got)
			}
		}
		msgs := env.SMTP.Messages()
		if len(msgs) != 1 {
			t.Fatalf("relay got %d messages, want 1", len(msgs))
		}
		if !bytes.Equal(msgs[0].Data, data) {
			t.Errorf("delivered message differs from the submitted one:\n got %q\nwant %q", msgs[0].Data, data)
		}
		if strings.Join(msgs[0].To, ",") != "ann@example.com,bob@example.net" || msgs[0].From != "sender@example.com" {
			t.Errorf("envelope %s -> %v", msgs[0].From, msgs[0].To)
		}
	})
}

// TestSubmission_KeyHeaderIsTheKeyAndIsRemoved: an Idempotency-Key header
// (or Resend's) is the key; it is absent from the delivered message; the
// same key with another body is 554 5.7.0, as is the same Message-ID with
// another body.
func TestSubmission_KeyHeaderIsTheKeyAndIsRemoved(t *testing.T) {
	eachEnv(t, func(t *testing.T, env *sendoncetest.Env, addr string) {
		c := dial(t, addr, env.AdminKey)
		to := []string{"ann@example.com"}
		for _, header := range []string{"Idempotency-Key", "Resend-Idempotency-Key"} {
			key := "order-" + header
			data := mail(newMsgID(), "First body.", header+": "+key)
			text, err := submit(c, "sender@example.com", to, data)
			if err != nil {
				t.Fatalf("%s: submit: %v", header, err)
			}
			id := sendID(t, text)
			if n := sendsOf(t, env, key); n != 1 {
				t.Errorf("%s: %d sends under %q, want 1", header, n, key)
			}
			_, err = submit(c, "sender@example.com", to, mail(newMsgID(), "Another body.", header+": "+key))
			if code(err) != 554 || enhanced(err) != "5.7.0" {
				t.Errorf("%s: same key, other body: %v, want 554 5.7.0", header, err)
			}
			// The refusal names the send that holds the key, and never
			// advises a new key: a client that took that advice on a retry
			// would send the email twice.
			if msg := fmt.Sprint(err); !strings.Contains(msg, id) || strings.Contains(strings.ToLower(msg), "new key") {
				t.Errorf("%s: the 554 says %q, want it to name %s and advise no new key", header, msg, id)
			}
			delivered(t, env, id)
		}
		for _, m := range env.SMTP.Messages() {
			if bytes.Contains(bytes.ToLower(m.Data), []byte("idempotency-key")) {
				t.Errorf("the key header reached the relay:\n%s", m.Data)
			}
		}

		msgID := newMsgID()
		if _, err := submit(c, "sender@example.com", to, mail(msgID, "One body.")); err != nil {
			t.Fatal(err)
		}
		_, err := submit(c, "sender@example.com", to, mail(msgID, "A different body."))
		if code(err) != 554 || enhanced(err) != "5.7.0" {
			t.Errorf("same Message-ID, other body: %v, want 554 5.7.0", err)
		}
		_, err = submit(c, "sender@example.com", []string{"zed@example.com"}, mail(msgID, "One body."))
		if code(err) != 554 {
			t.Errorf("same Message-ID and body, other recipient: %v, want 554 (the envelope is in the fingerprint)", err)
		}
	})
}

// TestSubmission_ReplyLostAfterTheDotThenResent is RFC 1047's case: the
// connection is cut after the final dot, before the client reads the 250;
// the client reconnects and sends the same message; there is one send and
// one delivery.
func TestSubmission_ReplyLostAfterTheDotThenResent(t *testing.T) {
	eachEnv(t, func(t *testing.T, env *sendoncetest.Env, addr string) {
		p, err := tcpproxy.Start(addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		msgID := newMsgID()
		data := mail(msgID, "Sent twice, accepted once.")
		to := []string{"ann@example.com"}

		p.DropReplies(1000)
		c := dial(t, p.Addr, env.AdminKey)
		if text, err := submit(c, "sender@example.com", to, data); err == nil {
			t.Fatalf("the client read a reply through a proxy that drops it: %q", text)
		}
		if p.Dropped() != 1 {
			t.Fatalf("proxy dropped %d replies, want 1", p.Dropped())
		}
		p.DropReplies(0)
		c2 := dial(t, p.Addr, env.AdminKey)
		text, err := submit(c2, "sender@example.com", to, data)
		if err != nil {
			t.Fatalf("resend: %v", err)
		}
		id := sendID(t, text)
		if !strings.Contains(text, "already accepted") {
			t.Errorf("resend answered %q, want the first acceptance replayed", text)
		}
		delivered(t, env, id)
		if n := sendsOf(t, env, strings.Trim(msgID, "<>")); n != 1 {
			t.Errorf("%d sends, want 1", n)
		}
		time.Sleep(200 * time.Millisecond) // a second delivery, if there were one, would be on its way
		if got := env.SMTP.MessageIDCounts()[strings.Trim(msgID, "<>")]; got != 1 || len(env.SMTP.Messages()) != 1 {
			t.Errorf("relay saw the message %d times (%d messages), want once", got, len(env.SMTP.Messages()))
		}
	})
}

// TestSubmission_ConcurrentDuplicatesGetOne250AndThe451s: while the first
// message with a key is being accepted (its commit held up by another
// transaction), duplicates get 451 4.7.0; once it commits, it is the one
// send, and a later duplicate replays it. The copies go at once: whichever
// the server takes first is the first, so the test does not guess when it
// is far enough along.
func TestSubmission_ConcurrentDuplicatesGetOne250AndThe451s(t *testing.T) {
	eachEnv(t, func(t *testing.T, env *sendoncetest.Env, addr string) {
		msgID := newMsgID()
		data := mail(msgID, "Only once.")
		to := []string{"ann@example.com"}
		release := sendoncetest.HoldWrites(t, env.DB)
		defer release()

		const n = 5
		clients := make([]*smtp.Client, n)
		for i := range clients {
			clients[i] = dial(t, addr, env.AdminKey)
		}
		type result struct {
			text string
			err  error
		}
		results := make(chan result, n)
		for _, c := range clients {
			go func() {
				text, err := submit(c, "sender@example.com", to, data)
				results <- result{text, err}
			}()
		}
		next := func(what string) result {
			t.Helper()
			select {
			case r := <-results:
				return r
			case <-time.After(30 * time.Second):
				t.Fatalf("no answer to the %s within 30s", what)
				return result{}
			}
		}
		// All but the first are answered while its commit waits.
		for i := range n - 1 {
			if r := next("duplicates"); code(r.err) != 451 || enhanced(r.err) != "4.7.0" {
				t.Errorf("duplicate %d while the first runs: %q, %v; want 451 4.7.0", i, r.text, r.err)
			}
		}
		release()
		first := next("first")
		if first.err != nil {
			t.Fatalf("first: %v", first.err)
		}
		id := sendID(t, first.text)
		if !strings.Contains(first.text, "queued as") {
			t.Errorf("first answered %q", first.text)
		}
		c := dial(t, addr, env.AdminKey)
		again, err := submit(c, "sender@example.com", to, data)
		if err != nil || sendID(t, again) != id {
			t.Errorf("duplicate after the commit: %q, %v; want 250 naming %s", again, err, id)
		}
		if n := sendsOf(t, env, strings.Trim(msgID, "<>")); n != 1 {
			t.Errorf("%d sends, want 1", n)
		}
	})
}
