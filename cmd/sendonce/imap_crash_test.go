package main_test

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/sendonce/sendonce/internal/testkit/dovecottest"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// TestCrash_SIGKILLAfterSentAppend: a reply from a connected mailbox is
// appended to its Sent folder, and the worker is SIGKILLed after Dovecot
// stored the copy but before the worker heard so (a proxy swallows the
// APPEND's OK), so the copy is still owed in the database. Started again
// (once the owed copy's lease has run out, as it would have), the worker
// finds the copy by its Message-ID and does not append a second one.
func TestCrash_SIGKILLAfterSentAppend(t *testing.T) {
	binaryTest(t)
	d := dovecottest.Start(t, dovecottest.Options{})
	px := startAppendOKSwallower(t, d.Addr)
	smtpd := smtptest.Start(t, smtptest.Options{})
	dbPath := filepath.Join(t.TempDir(), "sendonce.db")
	db := "sqlite:" + dbPath
	secret := createKey(t, db, "crash", "send,read,admin")
	args := []string{"--db", db, "--transport", "smtp://" + smtpd.Addr + "?tls=none", "--poll-interval", "50ms", "--outbound-allow", "127.0.0.0/8"}
	p := startServe(t, args...)

	call := func(url, method, path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k-"+strings.ReplaceAll(path, "/", "-")+"-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var v map[string]any
		_ = json.Unmarshal(b, &v)
		return resp.StatusCode, v
	}
	if code, v := call(p.url, "POST", "/v1/mailboxes", `{"id":"support","address":"support@example.com","imap":"imap://alice:secret@`+px.addr+`?tls=none"}`); code != 201 {
		t.Fatalf("connect the mailbox: %d %v", code, v)
	}
	code, v := call(p.url, "POST", "/v1/send", `{"mailbox_id":"support","to":"ann@example.org","subject":"Re: order","text":"On its way."}`)
	if code != 200 {
		t.Fatalf("send: %d %v", code, v)
	}
	msgID := v["message_id"].(string)

	// Dovecot has the copy; the worker waits for an OK that will not come.
	waitFor(t, 30*time.Second, "the copy in Sent", func() bool { return len(d.MessageIDs(t, "alice", "Sent")) == 1 })
	if !px.swallowed.Load() {
		t.Fatal("the APPEND's OK went through: the crash window was not opened")
	}
	p.sigkill(t)
	conn, err := sql.Open("sqlite", dbPath+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var owed int
	if err := conn.QueryRow(`SELECT count(*) FROM imap_appends`).Scan(&owed); err != nil || owed != 1 {
		t.Fatalf("owed copies after the kill: %d, %v; want the one whose OK was lost", owed, err)
	}
	// Time passes: the dead worker's lease runs out.
	if _, err := conn.Exec(`UPDATE imap_appends SET lease_until = 0`); err != nil {
		t.Fatal(err)
	}
	px.pass()
	p = startServe(t, args...)
	waitFor(t, 30*time.Second, "the owed copy settled", func() bool {
		return conn.QueryRow(`SELECT count(*) FROM imap_appends`).Scan(&owed) == nil && owed == 0
	})
	got := d.MessageIDs(t, "alice", "Sent")
	if len(got) != 1 || got[0] != msgID {
		t.Fatalf("Sent holds %q, want %s once", got, msgID)
	}
	if n := len(smtpd.Messages()); n != 1 {
		t.Fatalf("the relay got %d messages, want 1", n)
	}
}

// appendOKSwallower is a TCP proxy to an IMAP server that, until pass,
// drops the tagged OK of an APPEND and everything the server says after
// it on that connection: the server stored the message, the client never
// learns it.
type appendOKSwallower struct {
	addr      string
	passing   atomic.Bool
	swallowed atomic.Bool
	mu        sync.Mutex
	conns     []net.Conn
}

func startAppendOKSwallower(t *testing.T, target string) *appendOKSwallower {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &appendOKSwallower{addr: ln.Addr().String()}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go p.down(c, s)
		}
	}()
	return p
}

// down copies the server's lines to the client, swallowing from an
// APPEND's completion on.
func (p *appendOKSwallower) down(c, s net.Conn) {
	defer c.Close()
	r := bufio.NewReader(s)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if !p.passing.Load() && (strings.Contains(line, "[APPENDUID") || strings.Contains(line, "Append completed")) {
			p.swallowed.Store(true)
			_, _ = io.Copy(io.Discard, r)
			return
		}
		if _, err := c.Write([]byte(line)); err != nil {
			return
		}
	}
}

func (p *appendOKSwallower) pass() { p.passing.Store(true) }
