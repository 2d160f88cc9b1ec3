package imapsync

import (
	"bufio"
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/sendonce/sendonce/internal/imapurl"
	"github.com/sendonce/sendonce/internal/testkit/smtptest"
)

// ScriptedServer is an IMAP server that answers each command from a
// script, for the tests about the seam between the syncer and a server
// that is a stranger: it says what go-imap and the syncer must survive
// (a search naming UID 0 or four billion messages, an endless line), which
// no well-behaved server (Dovecot) would say.
type ScriptedServer struct {
	Addr string
	// Exists and UIDNext are what SELECT says.
	Exists, UIDNext string
	// Search answers UID SEARCH before the tagged OK ("%TAG%" is replaced
	// by the command's tag).
	Search string
	// TLS, when set, is offered through STARTTLS.
	TLS *tls.Config
	// Folders is how many folders LIST names.
	Folders int

	mu      sync.Mutex
	fetched []string // the sets UID FETCH asked for
	ln      net.Listener
}

// StartScripted listens on host (a loopback address) until the test ends.
func StartScripted(t testing.TB, host string, s *ScriptedServer) *ScriptedServer {
	t.Helper()
	ln, err := net.Listen("tcp", host+":0")
	if err != nil {
		t.Fatal(err)
	}
	s.ln, s.Addr = ln, ln.Addr().String()
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { s.serve(c) })
		}
	})
	return s
}

// Fetched is what UID FETCH asked for, in order.
func (s *ScriptedServer) Fetched() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.fetched...)
}

func (s *ScriptedServer) serve(c net.Conn) {
	defer func() { c.Close() }()
	w := bufio.NewWriter(c)
	say := func(lines ...string) bool {
		for _, l := range lines {
			w.WriteString(l)
			w.WriteString("\r\n")
		}
		return w.Flush() == nil
	}
	caps := "IMAP4rev1 ESEARCH IDLE"
	if s.TLS != nil {
		caps += " STARTTLS"
	}
	if !say("* OK [CAPABILITY " + caps + "] scripted") {
		return
	}
	r := bufio.NewReader(c)
	for range 10_000 {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			return
		}
		tag, cmd := f[0], strings.ToUpper(f[1])
		if cmd == "UID" && len(f) > 3 {
			cmd += " " + strings.ToUpper(f[2])
		}
		var ok bool
		switch cmd {
		case "CAPABILITY":
			ok = say("* CAPABILITY "+caps, tag+" OK done")
		case "STARTTLS":
			if s.TLS == nil || !say(tag+" OK begin TLS") {
				return
			}
			tc := tls.Server(c, s.TLS)
			if tc.Handshake() != nil {
				return
			}
			c, caps = tc, "IMAP4rev1 ESEARCH IDLE"
			r, w = bufio.NewReader(c), bufio.NewWriter(c)
			ok = true
		case "SELECT", "EXAMINE":
			ok = say("* "+s.Exists+" EXISTS", "* OK [UIDVALIDITY 1] v", "* OK [UIDNEXT "+s.UIDNext+"] n", tag+" OK [READ-ONLY] done")
		case "UID SEARCH":
			ok = say(strings.ReplaceAll(s.Search, "%TAG%", tag), tag+" OK done")
		case "UID FETCH":
			s.mu.Lock()
			s.fetched = append(s.fetched, f[3])
			s.mu.Unlock()
			ok = say(tag + " OK done")
		case "IDLE":
			if !say("+ idling") {
				return
			}
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
			ok = say(tag + " OK done")
		case "LIST":
			for i := range s.Folders {
				if !say(`* LIST () "/" "Folder ` + strconv.Itoa(i) + `"`) {
					return
				}
			}
			ok = say(tag + " OK done")
		case "LOGOUT":
			say("* BYE bye", tag+" OK done")
			return
		default: // LOGIN, NOOP and the rest
			ok = say(tag + " OK done")
		}
		if !ok {
			return
		}
	}
}

// TestDial_StartTLS: STARTTLS, done before the client so that the guard
// reads plain text, reaches a logged-in session over TLS with the
// server's certificate checked.
func TestDial_StartTLS(t *testing.T) {
	server, client := smtptest.SelfSignedTLS(t)
	s := StartScripted(t, "127.0.0.1", &ScriptedServer{Exists: "0", UIDNext: "1", TLS: server})
	cfg, err := imapurl.Parse("imap://u:p@" + s.Addr)
	if err != nil || cfg.TLS != imapurl.TLSStartTLS {
		t.Fatalf("parse: %+v %v", cfg, err)
	}
	if err := Probe(context.Background(), cfg, DialOptions{TLS: client}); err != nil {
		t.Fatalf("probe over STARTTLS: %v", err)
	}
	// A certificate the client does not trust is a TLS failure.
	if err := Probe(context.Background(), cfg, DialOptions{}); ClassOf(err) != ClassTLS {
		t.Fatalf("probe with an untrusted certificate: %v, want class %s", err, ClassTLS)
	}
}

// TestAppender_HostileAnswers: the appender's own reads of a server's
// answers — the search for a Sent copy and the list of folders — refuse a
// search naming UID 0 and an endless list (server_limit), without a panic.
func TestAppender_HostileAnswers(t *testing.T) {
	dial := func(t *testing.T, s *ScriptedServer) *imapclient.Client {
		t.Helper()
		StartScripted(t, "127.0.0.2", s)
		cfg, err := imapurl.Parse("imap://u:p@" + s.Addr + "?tls=none")
		if err != nil {
			t.Fatal(err)
		}
		c, err := Dial(context.Background(), cfg, DialOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c := dial(t, &ScriptedServer{Exists: "3", UIDNext: "4", Search: "* SEARCH 0"})
	if _, err := holds(c, "Sent", "<a@example.org>"); ClassOf(err) != ClassLimit {
		t.Errorf("a search naming UID 0: %v, want class %s", err, ClassLimit)
	}
	c = dial(t, &ScriptedServer{Exists: "3", UIDNext: "4", Search: `* ESEARCH (TAG "%TAG%") UID ALL 1:4294967295`})
	if there, err := holds(c, "Sent", "<a@example.org>"); err != nil || !there {
		t.Errorf("a search naming every UID: %v %v, want found", there, err)
	}
	c = dial(t, &ScriptedServer{Folders: 5000})
	if _, err := sentFolder(c, ""); ClassOf(err) != ClassLimit {
		t.Errorf("5,000 folders: %v, want class %s", err, ClassLimit)
	}
	c = dial(t, &ScriptedServer{Folders: 3})
	if got, err := sentFolder(c, ""); err != nil || got != "Sent" {
		t.Errorf("3 folders, none Sent: %q %v, want Sent", got, err)
	}
}
