package transport_test

// Delivery against a scripted SMTP server, for the exchanges the go-smtp
// server cannot produce (a garbage greeting, a malformed final reply,
// AUTH LOGIN only, an echoed password).

import (
	"context"
	"errors"
	"net"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/transport"
)

// fakeServer plays one scripted SMTP conversation on 127.0.0.1, for
// situations the go-smtp server cannot produce. It returns a config that
// points at it.
func fakeServer(t *testing.T, script func(c *textproto.Conn)) transport.SMTPConfig {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		script(textproto.NewConn(conn))
	}()
	t.Cleanup(func() {
		ln.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("fake server did not finish")
		}
	})
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	return transport.SMTPConfig{
		Host: host, Port: port, TLS: transport.TLSNone,
		DialTimeout: 2 * time.Second, CommandTimeout: 2 * time.Second, DataTimeout: 2 * time.Second,
	}
}

// expect reads one command line and checks its prefix.
func expect(t *testing.T, c *textproto.Conn, prefix string) string {
	line, err := c.ReadLine()
	if err != nil {
		t.Errorf("fake server: reading %q: %v", prefix, err)
		return ""
	}
	if !strings.HasPrefix(strings.ToUpper(line), strings.ToUpper(prefix)) {
		t.Errorf("fake server: got %q, want %s…", line, prefix)
	}
	return line
}

// upToData plays the server from the greeting to the end of the body.
func upToData(t *testing.T, c *textproto.Conn) {
	c.PrintfLine("220 fake ESMTP")
	expect(t, c, "EHLO ")
	c.PrintfLine("250 fake")
	mailToData(t, c)
}

// offerAuth plays the server from the greeting to its EHLO answer, which
// offers the one AUTH mechanism mech.
func offerAuth(t *testing.T, c *textproto.Conn, mech string) {
	c.PrintfLine("220 fake ESMTP")
	expect(t, c, "EHLO ")
	c.PrintfLine("250-fake")
	c.PrintfLine("250 AUTH %s", mech)
}

// mailToData plays the server from MAIL FROM to the end of the body.
func mailToData(t *testing.T, c *textproto.Conn) {
	expect(t, c, "MAIL FROM:")
	c.PrintfLine("250 ok")
	expect(t, c, "RCPT TO:")
	c.PrintfLine("250 ok")
	expect(t, c, "RCPT TO:")
	c.PrintfLine("250 ok")
	expect(t, c, "DATA")
	c.PrintfLine("354 go ahead")
	if _, err := c.ReadDotBytes(); err != nil {
		t.Errorf("fake server: reading body: %v", err)
	}
}

func TestDeliverGreetingFailures(t *testing.T) {
	tests := []struct {
		name    string
		script  func(c *textproto.Conn)
		class   transport.Class
		code    int
		reached bool
	}{
		{"554 greeting", func(c *textproto.Conn) { c.PrintfLine("554 5.7.1 go away") }, transport.Permanent, 554, true},
		{"421 greeting", func(c *textproto.Conn) { c.PrintfLine("421 4.3.2 busy") }, transport.Temporary, 421, true},
		{"closed before greeting", func(c *textproto.Conn) {}, transport.Temporary, 0, false},
		{"garbage greeting", func(c *textproto.Conn) { c.PrintfLine("HTTP/1.1 400 Bad Request") }, transport.Temporary, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			te := deliverErr(t, context.Background(), fakeServer(t, tt.script), testMessage("g@sendonce.test"))
			checkErr(t, te, tt.class, transport.StageGreeting, tt.code, tt.reached)
		})
	}
}

func TestDeliverCommandTimeoutBeforeData(t *testing.T) {
	release := make(chan struct{})
	cfg := fakeServer(t, func(c *textproto.Conn) {
		c.PrintfLine("220 fake ESMTP")
		expect(t, c, "EHLO ")
		<-release // never answer until the client gave up
	})
	cfg.CommandTimeout = 200 * time.Millisecond
	te := deliverErr(t, context.Background(), cfg, testMessage("t@sendonce.test"))
	close(release)
	checkErr(t, te, transport.Temporary, transport.StageEHLO, 0, true)
}

// TestDeliverFinalReply: what the server does after the body decides the
// outcome: any 2xx is success, even when QUIT then fails; a reply that is
// not SMTP leaves it ambiguous.
func TestDeliverFinalReply(t *testing.T) {
	for _, tt := range []struct {
		name      string
		afterData func(t *testing.T, c *textproto.Conn)
		ambiguous bool
	}{
		{"QUIT failure is success", func(t *testing.T, c *textproto.Conn) {
			c.PrintfLine("250 2.0.0 queued")
			expect(t, c, "QUIT")
			// Hang up without the 221.
		}, false},
		{"any 2xx is success", func(t *testing.T, c *textproto.Conn) {
			c.PrintfLine("251 2.0.0 queued elsewhere")
			expect(t, c, "QUIT")
			c.PrintfLine("221 bye")
		}, false},
		{"malformed is ambiguous", func(t *testing.T, c *textproto.Conn) { c.PrintfLine("what?") }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fakeServer(t, func(c *textproto.Conn) {
				upToData(t, c)
				tt.afterData(t, c)
			})
			if tt.ambiguous {
				te := deliverErr(t, context.Background(), cfg, testMessage("m@sendonce.test"))
				checkErr(t, te, transport.Ambiguous, transport.StageDataEnd, 0, true)
				return
			}
			if err := transport.NewSMTP(cfg).Deliver(context.Background(), testEnvelope, testMessage("q@sendonce.test")); err != nil {
				t.Fatalf("Deliver = %v, want success", err)
			}
		})
	}
}

func TestDeliverAuthLoginFallback(t *testing.T) {
	cfg := fakeServer(t, func(c *textproto.Conn) {
		offerAuth(t, c, "LOGIN")
		expect(t, c, "AUTH LOGIN cmVsYXktdXNlcg==") // relay-user
		c.PrintfLine("334 UGFzc3dvcmQ6")            // Password:
		if got := expect(t, c, ""); got != "Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5LXN0YXBsZQ==" {
			t.Errorf("fake server: LOGIN password line = %q", got)
		}
		c.PrintfLine("235 2.7.0 ok")
		mailToData(t, c)
		c.PrintfLine("250 queued")
		expect(t, c, "QUIT")
		c.PrintfLine("221 bye")
	})
	cfg.Username, cfg.Password = testUser, testPassword
	if err := transport.NewSMTP(cfg).Deliver(context.Background(), testEnvelope, testMessage("l@sendonce.test")); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
}

func TestDeliverErrorRedactsEchoedPassword(t *testing.T) {
	cfg := fakeServer(t, func(c *textproto.Conn) {
		offerAuth(t, c, "PLAIN")
		expect(t, c, "AUTH PLAIN ")
		c.PrintfLine("535 5.7.8 password %s is wrong", testPassword)
		// go-smtp cancels the exchange, then the transport says QUIT.
		for range 2 {
			if _, err := c.ReadLine(); err != nil {
				return
			}
			c.PrintfLine("221 bye")
		}
	})
	cfg.Username, cfg.Password = testUser, testPassword
	te := deliverErr(t, context.Background(), cfg, testMessage("r@sendonce.test"))
	checkErr(t, te, transport.Permanent, transport.StageAuth, 535, true)
	var se *smtp.SMTPError
	if !errors.As(te, &se) {
		t.Errorf("redaction lost the *smtp.SMTPError: %v", te)
	}
}
