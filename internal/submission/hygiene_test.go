package submission_test

import (
	"bytes"
	"encoding/base64"
	"net"
	"net/textproto"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestSubmission_BccHeaderIsNotDelivered: a client's Bcc header is
// dropped, as Postfix and Exim drop it (delivered, it tells every
// recipient who else got the mail); the blind recipient still gets the
// message through the envelope.
func TestSubmission_BccHeaderIsNotDelivered(t *testing.T) {
	eachEnv(t, func(t *testing.T, env *sendoncetest.Env, addr string) {
		c := dial(t, addr, env.AdminKey)
		to := []string{"ann@example.com", "secret@example.com"}
		text, err := submit(c, "sender@example.com", to, mail(newMsgID(), "Hi.", "Bcc: secret@example.com"))
		if err != nil {
			t.Fatal(err)
		}
		delivered(t, env, sendID(t, text))
		msgs := env.SMTP.Messages()
		var rcpt []string
		for _, m := range msgs {
			rcpt = append(rcpt, m.To...)
			if bytes.Contains(bytes.ToLower(m.Data), []byte("\r\nbcc:")) || bytes.Contains(m.Data, []byte("secret@example.com")) {
				t.Errorf("the Bcc header reached the relay:\n%s", m.Data)
			}
		}
		if !slices.Contains(rcpt, "secret@example.com") {
			t.Errorf("the blind recipient got nothing: envelopes %v", rcpt)
		}
	})
}

// TestSubmission_BccIsInTheFingerprint: the fingerprint covers the
// message as submitted less its key header — Bcc included, although Bcc is
// never delivered — so the same key with another Bcc is other content
// (554), and the same message again is its replay (250, the same send).
func TestSubmission_BccIsInTheFingerprint(t *testing.T) {
	env, addr := startEnv(t, sendoncetest.SQLite)
	c := dial(t, addr, env.AdminKey)
	to := []string{"ann@example.com", "bob@example.com", "cy@example.com"}
	msgID := newMsgID()
	first := mail(msgID, "Hi.", "Bcc: bob@example.com")
	text, err := submit(c, "sender@example.com", to, first)
	if err != nil {
		t.Fatal(err)
	}
	again, err := submit(c, "sender@example.com", to, first)
	if err != nil || sendID(t, again) != sendID(t, text) {
		t.Fatalf("the same message again: %q %v, want the first send %s", again, err, sendID(t, text))
	}
	_, err = submit(c, "sender@example.com", to, mail(msgID, "Hi.", "Bcc: cy@example.com"))
	if code(err) != 554 {
		t.Fatalf("the same Message-ID with another Bcc: %v, want 554 (other content)", err)
	}
}

// TestSubmission_BareLineEndsAreRefused: a bare CR or LF in the data is
// refused with 550 5.6.0 and no send: passed on, a next hop that reads
// "\r.\r\n" or "\n.\n" as the end of data would take what follows as
// another message (SMTP smuggling).
func TestSubmission_BareLineEndsAreRefused(t *testing.T) {
	eachEnv(t, func(t *testing.T, env *sendoncetest.Env, addr string) {
		for name, data := range map[string][]byte{
			"bare LF":      append(mail(newMsgID(), "one"), []byte("smuggled\n.\nMAIL FROM:<x@evil.example>\r\n")...),
			"bare CR":      append(mail(newMsgID(), "one"), []byte("smuggled\r.\rMAIL FROM:<x@evil.example>\r\n")...),
			"LF line ends": bytes.ReplaceAll(mail(newMsgID(), "one"), []byte("\r\n"), []byte("\n")),
			"CR in a line": mail(newMsgID(), "one\rtwo"),
		} {
			if code, msg := rawSubmit(t, addr, env.AdminKey, data); code != 550 || !strings.HasPrefix(msg, "5.6.0") {
				t.Errorf("%s: %d %s, want 550 5.6.0", name, code, msg)
			}
		}
		if n := env.QueryInt(t, `SELECT count(*) FROM sends`); n != 0 {
			t.Errorf("%d sends made from refused messages", n)
		}
	})
}

// rawSubmit speaks SMTP itself, so that the data reaches the server byte
// for byte (a client's DATA writer turns a bare LF into CRLF), and
// returns the reply to the final dot.
func rawSubmit(t *testing.T, addr, secret string, data []byte) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	tc := textproto.NewConn(conn)
	step := func(want int, format string, args ...any) {
		t.Helper()
		if format != "" {
			if err := tc.PrintfLine(format, args...); err != nil {
				t.Fatal(err)
			}
		}
		if _, msg, err := tc.ReadResponse(want); err != nil {
			t.Fatalf("%q: %v %s", format, err, msg)
		}
	}
	step(220, "")
	step(250, "EHLO test.example")
	step(235, "AUTH PLAIN %s", base64.StdEncoding.EncodeToString([]byte("\x00app\x00"+secret)))
	step(250, "MAIL FROM:<sender@example.com>")
	step(250, "RCPT TO:<ann@example.com>")
	step(354, "DATA")
	if _, err := tc.W.Write(append(data, "\r\n.\r\n"...)); err != nil || tc.W.Flush() != nil {
		t.Fatalf("write data: %v", err)
	}
	code, msg, _ := tc.ReadResponse(0)
	return code, msg
}

// TestSubmission_RequireVerifiedDomain: with --require-verified-domain a
// message whose From domain the tenant has not verified is refused for
// good (5.7.x) and nothing is sent; SMTP is a door like the API's.
func TestSubmission_RequireVerifiedDomain(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true, RequireVerifiedDomain: true})
	c := dial(t, serve(t, env.Server.Submission, "127.0.0.1:0", false), env.AdminKey)
	_, err := submit(c, "sender@example.com", []string{"ann@example.com"}, mail(newMsgID(), "Hi."))
	if code(err) < 500 || enhanced(err) != "5.7.1" {
		t.Fatalf("from an unverified domain: %v, want a permanent 5.7.1", err)
	}
	if n := env.QueryInt(t, `SELECT count(*) FROM sends`); n != 0 {
		t.Fatalf("%d sends stored from a refused message", n)
	}
}
