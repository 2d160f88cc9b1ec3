package mxserver_test

import (
	"bufio"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/mxserver"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// smtpErr is err's SMTP code and enhanced code, "" when it has none.
func smtpErr(err error) (int, smtp.EnhancedCode) {
	if e, ok := err.(*smtp.SMTPError); ok {
		return e.Code, e.EnhancedCode
	}
	return 0, smtp.EnhancedCode{}
}

// TestInbound_HeaderBombIsRefusedInBoundedMemory: a message of 1.6
// million "A:b" header lines (8 MB, under the size limit) is answered
// 552 5.3.4, nothing is stored, and the whole session (client and server
// are this process) allocates a few times the message, not the hundreds
// of MiB net/mail and go-message took to read such a header.
func TestInbound_HeaderBombIsRefusedInBoundedMemory(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true, Inbound: true})
	createInbox(t, env, "support@recv.test")
	bomb := []byte("From: Mallory <mallory@sender.test>\r\nTo: support@recv.test\r\n" +
		strings.Repeat("A:b\r\n", 1600_000) + "\r\nbody\r\n")

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := receive(t, env.InboundAddr, "support@recv.test", bomb)
	runtime.ReadMemStats(&after)
	if code, enh := smtpErr(err); code != 552 || enh != (smtp.EnhancedCode{5, 3, 4}) {
		t.Fatalf("header bomb: %v, want 552 5.3.4", err)
	}
	if got, bound := after.TotalAlloc-before.TotalAlloc, uint64(4*len(bomb)); got > bound {
		t.Fatalf("the session allocated %d MiB for a %d MiB message, want at most %d MiB", got>>20, len(bomb)>>20, bound>>20)
	}
	if n := env.QueryInt(t, "SELECT count(*) FROM received_messages"); n != 0 {
		t.Fatalf("%d messages stored from a refused header", n)
	}
}

// TestInbound_MemoryBudgetRefusesPastIt: messages being read hold at most
// --inbound-max-memory together; one that would go past it is answered
// 452 4.3.1 (tried again later), and the room comes back once a message
// is stored.
func TestInbound_MemoryBudgetRefusesPastIt(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true, Inbound: true,
		InboundLimits: mxserver.Limits{MaxMemory: 512 << 10}})
	createInbox(t, env, "support@recv.test")
	mail := func(id string, size int) []byte {
		return []byte("From: Alice <alice@sender.test>\r\nTo: support@recv.test\r\nMessage-ID: <" + id + "@sender.test>\r\n" +
			"Subject: x\r\n\r\n" + strings.Repeat(strings.Repeat("x", 78)+"\r\n", size/80))
	}
	if err := receive(t, env.InboundAddr, "support@recv.test", mail("small1", 200<<10)); err != nil {
		t.Fatalf("a message within the budget: %v", err)
	}
	err := receive(t, env.InboundAddr, "support@recv.test", mail("large", 1<<20))
	if code, enh := smtpErr(err); code != 452 || enh != (smtp.EnhancedCode{4, 3, 1}) {
		t.Fatalf("a message past the budget: %v, want 452 4.3.1", err)
	}
	if err := receive(t, env.InboundAddr, "support@recv.test", mail("small2", 200<<10)); err != nil {
		t.Fatalf("a message after one was refused: %v (the budget was not given back)", err)
	}
}

// line reads one reply line from c, waiting at most wait.
func line(t *testing.T, r *bufio.Reader, c net.Conn) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	l, err := r.ReadString('\n')
	if err != nil {
		return "error: " + err.Error()
	}
	return l
}

// dialRaw opens a connection to the listener and reads its greeting.
func dialRaw(t *testing.T, addr string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	return c, r, line(t, r, c)
}

// TestInbound_SessionDeadline: a session that stays connected, even one
// answering within the per-read timeout, ends at its absolute deadline
// (--inbound-session-timeout) with 421.
func TestInbound_SessionDeadline(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{Inbound: true,
		InboundLimits: mxserver.Limits{SessionTimeout: 300 * time.Millisecond}})
	c, r, greeting := dialRaw(t, env.InboundAddr)
	if !strings.HasPrefix(greeting, "220") {
		t.Fatalf("greeting %q", greeting)
	}
	if _, err := c.Write([]byte("NOOP\r\n")); err != nil {
		t.Fatal(err)
	}
	if l := line(t, r, c); !strings.HasPrefix(l, "250") {
		t.Fatalf("NOOP: %q", l)
	}
	// The per-read timeout is 2 minutes; only the session's deadline
	// ends the wait within `wait`.
	if l := line(t, r, c); !strings.HasPrefix(l, "421") {
		t.Fatalf("past the session deadline: %q, want 421", l)
	}
}

// TestInbound_CommandsOutsideATransactionAreBounded: a session may send
// MaxIdleCommands commands between messages (HELO, NOOP, RSET…); the next
// is answered 421 and the connection closed. A message starts the count
// again, so a sender delivering mail is never cut off.
func TestInbound_CommandsOutsideATransactionAreBounded(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true, Inbound: true,
		InboundLimits: mxserver.Limits{MaxIdleCommands: 5}})
	createInbox(t, env, "support@recv.test")
	c := helloRelay(t, env.InboundAddr) // HELO is command 1
	defer c.Close()
	for i := 2; i <= 3; i++ {
		if err := c.Noop(); err != nil {
			t.Fatalf("NOOP %d: %v", i, err)
		}
	}
	// MAIL (4) opens a transaction; RCPT and DATA are its own.
	if err := c.SendMail("alice@sender.test", []string{"support@recv.test"}, strings.NewReader(plainMail)); err != nil {
		t.Fatalf("a message within the budget: %v", err)
	}
	for i := 1; i <= 5; i++ {
		if err := c.Noop(); err != nil {
			t.Fatalf("NOOP %d after a message: %v (the count did not start again)", i, err)
		}
	}
	if code, _ := smtpErr(c.Noop()); code != 421 {
		t.Fatalf("command 6 outside a transaction: %d, want 421", code)
	}
}

// TestInbound_FullListenerEndsTheIdlestSession: with every slot held, a
// newcomer is served and the session idle the longest is ended with 421,
// so held-open connections cannot keep senders out.
func TestInbound_FullListenerEndsTheIdlestSession(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{Inbound: true, InboundLimits: mxserver.Limits{MaxConns: 3}})
	idle, idleR, g := dialRaw(t, env.InboundAddr)
	if !strings.HasPrefix(g, "220") {
		t.Fatalf("greeting %q", g)
	}
	for i := 0; i < 2; i++ {
		c, r, g := dialRaw(t, env.InboundAddr)
		if !strings.HasPrefix(g, "220") {
			t.Fatalf("connection %d greeted %q", i+2, g)
		}
		if _, err := c.Write([]byte("NOOP\r\n")); err != nil {
			t.Fatal(err)
		}
		if l := line(t, r, c); !strings.HasPrefix(l, "250") {
			t.Fatalf("NOOP: %q", l)
		}
	}
	if _, _, g := dialRaw(t, env.InboundAddr); !strings.HasPrefix(g, "220") {
		t.Fatalf("a newcomer to a full listener was greeted %q, want 220", g)
	}
	if l := line(t, idleR, idle); !strings.HasPrefix(l, "421") {
		t.Fatalf("the idlest session got %q, want 421", l)
	}
}
