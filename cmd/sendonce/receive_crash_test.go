package main_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/testkit/tcpproxy"
)

// TestCrash_ReceivedThenKilledBeforeTheReply: a real sendonce stores a
// received message, its 250 never reaches the sender (a proxy swallows
// it), and the process is killed with SIGKILL; the sending MTA tries
// again after the restart and the message is recognised: one received
// message.
func TestCrash_ReceivedThenKilledBeforeTheReply(t *testing.T) {
	eachDB(t, func(t *testing.T, _, db string) {
		secret := createKey(t, db, "in", "send,read,admin")
		run(t, binPath, "domains", "add", "--db", db, "--algorithm", "ed25519", "crash.test") // inboxes are on the tenant's domains
		args := []string{"--db", db, "--inbound-addr", "127.0.0.1:0"}
		p := startServe(t, args...)
		api := func(p *proc, method, path string, body any) (int, map[string]any) {
			var payload []byte
			if body != nil {
				payload, _ = json.Marshal(body)
			}
			status, b := apiCall(t, method, p.url+path, secret, "", string(payload))
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			return status, m
		}
		if st, m := api(p, "POST", "/inboxes", map[string]any{"email_address": "desk@crash.test"}); st != http.StatusCreated {
			t.Fatalf("inbox: %d %v", st, m)
		}
		count := func(p *proc) int {
			_, m := api(p, "GET", "/v1/received", nil)
			d, _ := m["data"].([]any)
			return len(d)
		}
		data := []byte("From: a@sender.test\r\nTo: desk@crash.test\r\nSubject: once\r\nMessage-ID: <in-1@sender.test>\r\n\r\nStored once.\r\n")
		deliver := func(addr string) error {
			c, err := smtp.Dial(addr)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.Mail("a@sender.test", nil); err != nil {
				return err
			}
			if err := c.Rcpt("desk@crash.test", nil); err != nil {
				return err
			}
			w, err := c.Data()
			if err != nil {
				return err
			}
			if _, err := w.Write(data); err != nil {
				return err
			}
			return w.Close()
		}

		proxy, err := tcpproxy.Start(p.inboundAddr(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer proxy.Close()
		proxy.DropReplies(1000)
		if err := deliver(proxy.Addr); err == nil {
			t.Fatal("the sender heard a reply the proxy should have swallowed")
		}
		// The sender gave up when its reply went missing; the server may
		// still be finishing the store it answers after.
		waitFor(t, 10*time.Second, "the one message stored before the kill", func() bool { return count(p) == 1 })
		p.sigkill(t)

		p = startServe(t, args...)
		if err := deliver(p.inboundAddr(t)); err != nil {
			t.Fatalf("the retry after the restart: %v", err)
		}
		if n := count(p); n != 1 {
			t.Fatalf("%d received messages after the retry, want 1", n)
		}
	})
}
