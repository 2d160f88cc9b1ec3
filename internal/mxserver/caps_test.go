package mxserver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/mxserver"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// TestInbound_ForgedReportsAreBounded: anyone who sees a send's
// Return-Path can write reports to it; past core.MaxReportsPerSend they
// change nothing, so the send's history stays bounded.
func TestInbound_ForgedReportsAreBounded(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		id, msgID := sendTo(t, env, env.AdminKey, sendoncetest.Mail("Ann <ann@rcpt.test>", "hello"))
		env.WaitStatus(t, id, wait, core.StatusSent)
		bounceAddr := env.SMTP.Messages()[0].From
		for i := 0; i < core.MaxReportsPerSend+15; i++ {
			dsn := dsnMail(bounceAddr, msgID, report{rcpt: "ann@rcpt.test", action: "delayed", status: "4.4.1", diag: fmt.Sprintf("try %d", i)})
			if err := deliver(t, env.InboundAddr, bounceAddr, dsn); err != nil {
				t.Fatalf("report %d: %v", i, err)
			}
		}
		_, s := get(t, env, env.AdminKey, "/v1/sends/"+id)
		if n := len(events(s, core.EventDeliveryDelayed)); n != core.MaxReportsPerSend {
			t.Fatalf("%d delay events from %d reports, want the bound %d", n, core.MaxReportsPerSend+15, core.MaxReportsPerSend)
		}
		_, un := get(t, env, env.AdminKey, "/v1/inbound/unmatched?limit=100")
		if n := len(un["data"].([]any)); n != 15 {
			t.Fatalf("%d unmatched items, want the 15 past the bound", n)
		}
	})
}

// TestInbound_UnmatchedKeepsTheStartAndTheSize: an unmatched message is
// kept only in part; the list shows its whole size without reading it.
func TestInbound_UnmatchedKeepsTheStartAndTheSize(t *testing.T) {
	sendoncetest.EachEnv(t, sendoncetest.Options{SMTP: true, Inbound: true}, func(t *testing.T, env *sendoncetest.Env) {
		id, _ := sendTo(t, env, env.AdminKey, sendoncetest.Mail("Ann <ann@rcpt.test>", "hello"))
		env.WaitStatus(t, id, wait, core.StatusSent)
		bounceAddr := env.SMTP.Messages()[0].From
		big := "Subject: not a report\r\n\r\n" + strings.Repeat("0123456789abcdef\r\n", 30000) // ~540 KB
		if err := deliver(t, env.InboundAddr, bounceAddr, []byte(big)); err != nil {
			t.Fatal(err)
		}
		_, un := get(t, env, env.AdminKey, "/v1/inbound/unmatched")
		items := un["data"].([]any)
		if len(items) != 1 || int(items[0].(map[string]any)["size"].(float64)) != len(big) {
			t.Fatalf("unmatched: %v, want one of %d bytes", items, len(big))
		}
		if n := env.QueryInt(t, "SELECT length(raw) FROM inbound_unmatched"); n != core.MaxUnmatchedKeep {
			t.Fatalf("kept %d bytes of an unmatched message, want %d", n, core.MaxUnmatchedKeep)
		}
	})
}

// TestInbound_ConnectionsPerAddressAreBounded: one client address may hold
// DefaultMaxConnsPerIP connections; the next is greeted 421 and closed.
func TestInbound_ConnectionsPerAddressAreBounded(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{Inbound: true})
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	greet := func() string {
		c, err := net.DialTimeout("tcp", env.InboundAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line
	}
	for i := 0; i < mxserver.DefaultMaxConnsPerIP; i++ {
		if g := greet(); !strings.HasPrefix(g, "220") {
			t.Fatalf("connection %d greeted %q", i+1, g)
		}
	}
	if g := greet(); !strings.HasPrefix(g, "421") {
		t.Fatalf("connection %d from one address greeted %q, want 421", mxserver.DefaultMaxConnsPerIP+1, g)
	}
	// QUIT and read to the end: the listener stops counting a connection
	// before it closes it, so once the end is read the slot is free.
	if _, err := held[0].Write([]byte("QUIT\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = held[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if rest, err := io.ReadAll(held[0]); err != nil || !strings.HasPrefix(string(rest), "221") {
		t.Fatalf("QUIT: %q %v", rest, err)
	}
	held[0].Close()
	held = held[1:]
	if g := greet(); !strings.HasPrefix(g, "220") {
		t.Fatalf("after one closed, a new connection was greeted %q", g)
	}
}

// TestReceiving_StorageCapFollowsWhatIsKept: past --max-received-storage
// mail is refused 452; deleting a thread and the retention purge give the
// room back (the usage row follows every write, on both databases).
func TestReceiving_StorageCapFollowsWhatIsKept(t *testing.T) {
	sendoncetest.EachBackend(t, func(t *testing.T, b sendoncetest.Backend) {
		mail := func(i int) []byte {
			return []byte(strings.Replace(plainMail, "<m1@", fmt.Sprintf("<m%d@", i), 1))
		}
		size := int64(len(mail(1)))
		env := sendoncetest.Start(t, sendoncetest.Options{Backend: b, SMTP: true, Inbound: true, MaxReceivedBytes: 2*size + size/2})
		inbox := createInbox(t, env, "support@recv.test")
		for i := 1; i <= 2; i++ {
			if err := receive(t, env.InboundAddr, "support@recv.test", mail(i)); err != nil {
				t.Fatalf("message %d under the cap: %v", i, err)
			}
		}
		if err := receive(t, env.InboundAddr, "support@recv.test", mail(3)); smtpCode(err) != 452 {
			t.Fatalf("message past the cap: %v, want 452", err)
		}
		threads := env.Do(t, sendoncetest.Request{Method: "GET", Path: "/inboxes/" + inbox + "/threads", Key: env.AdminKey}).JSON(t)["data"].([]any)
		if len(threads) != 2 {
			t.Fatalf("%d threads, want one per message", len(threads))
		}
		thread := threads[0].(map[string]any)["id"].(string)
		if r := env.Do(t, sendoncetest.Request{Method: "DELETE", Path: "/inboxes/" + inbox + "/threads/" + thread, Key: env.AdminKey}); r.Status != 200 {
			t.Fatalf("delete thread: %d %s", r.Status, r.Body)
		}
		if err := receive(t, env.InboundAddr, "support@recv.test", mail(3)); err != nil {
			t.Fatalf("after the thread was deleted: %v, want room again", err)
		}
		if n := env.QueryInt(t, "SELECT messages FROM received_usage"); n != 2 {
			t.Fatalf("usage counts %d messages, want 2", n)
		}
		if _, err := env.Server.Store.PurgeSends(context.Background(), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if n := env.QueryInt(t, "SELECT messages + bytes FROM received_usage"); n != 0 {
			t.Fatalf("usage after the purge: %d, want 0", n)
		}
	})
}
