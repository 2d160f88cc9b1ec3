package imapsync

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"
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
	defer c.Close()
	w := bufio.NewWriter(c)
	say := func(lines ...string) bool {
		for _, l := range lines {
			w.WriteString(l)
			w.WriteString("\r\n")
		}
		return w.Flush() == nil
	}
	if !say("* OK [CAPABILITY IMAP4rev1 ESEARCH IDLE] scripted") {
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
			ok = say("* CAPABILITY IMAP4rev1 ESEARCH IDLE", tag+" OK done")
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
