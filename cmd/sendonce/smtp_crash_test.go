package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestCrash_SMTPKilledBetweenDataAndReply: a real sendonce is killed with
// SIGKILL after the client's final dot and before its reply (the commit is
// held up); the client never hears; after the restart it sends the same
// message again and gets one send, delivered once.
func TestCrash_SMTPKilledBetweenDataAndReply(t *testing.T) {
	eachDB(t, func(t *testing.T, _, db string) {
		relay := smtptest.Start(t, smtptest.Options{})
		secret := createKey(t, db, "smtp", "send,read")
		args := []string{"--db", db, "--transport", "smtp://" + relay.Addr + "?tls=none", "--smtp-addr", "127.0.0.1:0",
			"--retry-base", "50ms", "--poll-interval", "20ms"}
		p := startServe(t, args...)
		addr := p.smtpAddr(t)

		data := []byte("From: sender@example.com\r\nTo: ann@example.com\r\nSubject: crash\r\n" +
			"Message-ID: <crash-1@example.com>\r\n\r\nAccepted once, whatever happens.\r\n")
		send := func(addr string) (string, error) {
			c, err := smtp.Dial(addr)
			if err != nil {
				return "", err
			}
			defer c.Close()
			if err := c.Auth(sasl.NewPlainClient("", "app", secret)); err != nil {
				return "", err
			}
			return smtptest.Transact(c, "sender@example.com", []string{"ann@example.com"}, data)
		}

		release := sendoncetest.HoldWrites(t, db)
		replied := make(chan error, 1)
		go func() { _, err := send(addr); replied <- err }()
		time.Sleep(700 * time.Millisecond) // past the dot: the acceptance waits for the lock
		select {
		case err := <-replied:
			t.Fatalf("the client got its reply while the commit was held: %v", err)
		default:
		}
		p.sigkill(t)
		if err := <-replied; err == nil {
			t.Fatal("the client read a 250 from a process killed before its commit")
		}
		release()

		p = startServe(t, args...)
		text, err := send(p.smtpAddr(t))
		if err != nil {
			t.Fatalf("retry after the restart: %v", err)
		}
		if !strings.Contains(text, "snd_") {
			t.Fatalf("retry answered %q", text)
		}
		_, b := apiCall(t, "GET", p.url+"/v1/sends?idempotency_key=crash-1@example.com", secret, "", "")
		var list struct {
			Data []struct{ ID string } `json:"data"`
		}
		if err := json.Unmarshal(b, &list); err != nil {
			t.Fatal(err)
		}
		if len(list.Data) != 1 || !strings.Contains(text, list.Data[0].ID) {
			t.Fatalf("sends under the Message-ID: %+v; the 250 said %q; want exactly that one", list.Data, text)
		}
		for deadline := time.Now().Add(20 * time.Second); len(relay.Messages()) == 0 && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		if n := relay.MessageIDCounts()["crash-1@example.com"]; n != 1 {
			t.Errorf("relay got the message %d times, want once", n)
		}
	})
}
