package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/sendonce/sendonce/internal/testkit/sendoncetest"
)

// countingServer is a go-smtp server on loopback that counts sessions and
// messages by Message-ID, and refuses the RCPT of every refuseEvery-th
// transaction (0: none).
type countingServer struct {
	addr        string
	refuseEvery int

	mu       sync.Mutex
	sessions int
	perConn  []int // messages taken on each session, in the order they opened
	mails    int
	ids      map[string]int
	sizes    []int
}

func startCountingServer(t *testing.T, refuseEvery int) *countingServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &countingServer{addr: ln.Addr().String(), refuseEvery: refuseEvery, ids: map[string]int{}}
	srv := smtp.NewServer(s)
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.ErrorLog = log.New(io.Discard, "", 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return s
}

func (s *countingServer) NewSession(*smtp.Conn) (smtp.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions++
	s.perConn = append(s.perConn, 0)
	return &countingSession{s: s, idx: len(s.perConn) - 1}, nil
}

type countingSession struct {
	s      *countingServer
	idx    int
	refuse bool
}

func (cs *countingSession) Mail(string, *smtp.MailOptions) error {
	cs.s.mu.Lock()
	defer cs.s.mu.Unlock()
	cs.s.mails++
	cs.refuse = cs.s.refuseEvery > 0 && cs.s.mails%cs.s.refuseEvery == 0
	return nil
}

func (cs *countingSession) Rcpt(string, *smtp.RcptOptions) error {
	if cs.refuse {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "refused by the test"}
	}
	return nil
}

func (cs *countingSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	id := ""
	for _, line := range strings.Split(string(b), "\r\n") {
		if v, ok := strings.CutPrefix(line, "Message-ID: "); ok {
			id = v
		}
	}
	cs.s.mu.Lock()
	defer cs.s.mu.Unlock()
	cs.s.ids[id]++
	cs.s.perConn[cs.idx]++
	cs.s.sizes = append(cs.s.sizes, len(b))
	return nil
}

func (cs *countingSession) Reset()        { cs.refuse = false }
func (cs *countingSession) Logout() error { return nil }

func testLoad(addr string) smtpLoad {
	return smtpLoad{addr: addr, sessions: 4, messages: 200, size: 1500,
		from: "bench@example.com", to: "sink@example.net", timeout: 10 * time.Second}
}

// Every message arrives once, distinct, of about the size asked for, over
// exactly --sessions connections kept open.
func TestSMTPLoad_EveryMessageOnceOverItsSessions(t *testing.T) {
	s := startCountingServer(t, 0)
	r, err := runSMTPLoad(context.Background(), testLoad(s.addr))
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.sent != 200 || r.errors != 0 || len(s.ids) != 200 || s.ids[""] != 0 {
		t.Fatalf("sent %d, errors %d (%s); the server saw %d distinct Message-IDs", r.sent, r.errors, r.firstError, len(s.ids))
	}
	if r.dials != 4 || s.sessions != 4 || slices.Contains(s.perConn, 0) {
		t.Fatalf("%d dials, %d sessions at the server carrying %v messages: want 4 sessions, each reused", r.dials, s.sessions, s.perConn)
	}
	for _, n := range s.sizes {
		if n < 1400 || n > 1600 {
			t.Fatalf("a message of %d bytes, want about 1500", n)
		}
	}
	if !(r.p50 > 0 && r.p50 <= r.p99) || r.perSecond() <= 0 {
		t.Fatalf("figures out of order: %+v", r)
	}
}

// A refused message counts as an error, the session goes on after RSET,
// and the mode fails: a rate with refusals in it would flatter the server.
func TestSMTPLoad_RefusalsAreErrors(t *testing.T) {
	s := startCountingServer(t, 10)
	var out bytes.Buffer
	err := smtpMode(context.Background(), testLoad(s.addr), &out)
	if err == nil || !strings.Contains(err.Error(), "20 of 200") {
		t.Fatalf("err = %v, want 20 of 200 refused; output %s", err, out.String())
	}
	if !strings.Contains(out.String(), "RESULT msgs=180 errors=20 ") {
		t.Fatalf("output %q", out.String())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions != 4 {
		t.Fatalf("%d sessions: a refusal should not cost the session", s.sessions)
	}
}

// Against sendonce's submission server the client authenticates with the
// API key and each message becomes one send; a wrong key fails every
// message and the run.
func TestSMTPLoad_SendonceSubmission(t *testing.T) {
	env := sendoncetest.Start(t, sendoncetest.Options{SMTP: true, NoWorkers: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- env.Server.Submission.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = env.Server.Submission.Shutdown(ctx)
		<-done
	})
	l := testLoad(ln.Addr().String())
	l.messages, l.sessions, l.key = 60, 3, env.AdminKey
	var out bytes.Buffer
	if err := smtpMode(context.Background(), l, &out); err != nil {
		t.Fatalf("%v; output %s", err, out.String())
	}
	if n := env.QueryInt(t, `SELECT count(*) FROM sends`); n != 60 {
		t.Fatalf("%d sends, want 60", n)
	}
	l.key = "so_not_a_key"
	if err := smtpMode(context.Background(), l, io.Discard); err == nil || !strings.Contains(err.Error(), "535") {
		t.Fatalf("with a wrong key: %v, want every message refused with 535", err)
	}
}
