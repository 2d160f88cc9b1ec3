package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// sinkTimeout bounds every read and write of a sink session, and how long
// close waits for the handlers.
const sinkTimeout = 30 * time.Second

// sink is the load tool's SMTP server on 127.0.0.1: it answers 250 to
// everything and counts messages per recipient, with the time of the last
// one and how many Message-IDs it saw more than once.
type sink struct {
	addr string
	srv  *smtp.Server
	ln   net.Listener
	done chan struct{}

	// faults, when set, picks what each transaction meets (the soak).
	faults *sinkFaults

	mu    sync.Mutex
	total int
	rcpts map[string]*rcptCount
	ids   map[string]int // messages kept per Message-ID
	began map[string]int // transactions that reached DATA, per Message-ID
	noID  int            // messages kept that carried no Message-ID
	// stories tells, per Message-ID, each transaction that reached DATA:
	// when, on which session, and what the sink did — for a finding to
	// say whether the sink ever saw the message. Bounded by the messages.
	stories map[string][]string
	// start, once set, is the soak's start: the stories' times count from
	// it, as the clients' histories and the fault schedule do.
	start time.Time
}

// sinkAct is what the sink does with one transaction.
type sinkAct int

const (
	sinkAccept     sinkAct = iota // 250, kept
	sinkTempFail                  // 451 to the end of DATA, not kept
	sinkReject                    // 550 to RCPT
	sinkHangUpKept                // reads the body, keeps it, hangs up without a reply
	sinkHangUpLost                // reads the body, drops it, hangs up without a reply
	sinkLate                      // keeps it and answers 250 only after sinkFaults.late
)

// sinkFaults lets the soak decide each transaction's fate.
type sinkFaults struct {
	pick func() sinkAct // called once per transaction, at MAIL
	late time.Duration  // how long sinkLate waits (capped by sinkTimeout)
}

type rcptCount struct {
	n    int
	last time.Time
	ids  map[string]int
	dups int
}

// startSink listens on 127.0.0.1:0 and serves until close.
func startSink() (*sink, error) { return startSinkOn("127.0.0.1:0") }

// serveSink runs the sink alone on addr until ctx ends, printing the
// messages it took every few seconds: a relay for a sendonce started by
// hand (--transport smtp://ADDR?tls=none).
func serveSink(ctx context.Context, addr string, stdout io.Writer) error {
	s, err := startSinkOn(addr)
	if err != nil {
		return err
	}
	defer s.close()
	fmt.Fprintf(stdout, "SMTP sink on %s (Ctrl-C stops it)\n", s.addr)
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stdout, "%d messages\n", s.messages())
			return nil
		case <-t.C:
			fmt.Fprintf(stdout, "%d messages\n", s.messages())
		}
	}
}

func startSinkOn(addr string) (*sink, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sink: listen: %w", err)
	}
	s := &sink{addr: ln.Addr().String(), ln: ln, done: make(chan struct{}), rcpts: map[string]*rcptCount{}, ids: map[string]int{}, began: map[string]int{}, stories: map[string][]string{}}
	srv := smtp.NewServer(s)
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	srv.EnableSMTPUTF8 = true
	srv.ReadTimeout = sinkTimeout
	srv.WriteTimeout = sinkTimeout
	srv.MaxMessageBytes = 10 << 20
	srv.ErrorLog = log.New(io.Discard, "", 0)
	s.srv = srv
	go func() {
		defer close(s.done)
		_ = srv.Serve(ln)
	}()
	return s, nil
}

// close stops accepting, then waits (bounded) for the sessions to end.
func (s *sink) close() {
	s.ln.Close()
	<-s.done
	ctx, cancel := context.WithTimeout(context.Background(), sinkTimeout)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

// count says how many messages reached rcpt, when the last did, and how
// many of them repeated a Message-ID already seen.
func (s *sink) count(rcpt string) (n, dups int, last time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.rcpts[strings.ToLower(rcpt)]
	if c == nil {
		return 0, 0, time.Time{}
	}
	return c.n, c.dups, c.last
}

// messages is how many messages the sink accepted in all.
func (s *sink) messages() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// idCounts copies the count of kept messages per Message-ID, and of the
// transactions that reached DATA (kept or not).
func (s *sink) idCounts() (kept, began map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.ids), maps.Clone(s.began)
}

// withoutID is how many kept messages carried no Message-ID.
func (s *sink) withoutID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.noID
}

// story is what the sink did with each transaction of a Message-ID.
func (s *sink) story(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.stories[id]) == 0 {
		return "no DATA with this Message-ID"
	}
	return strings.Join(s.stories[id], ", ")
}

// begin notes a transaction that reached DATA, and what the sink does
// with it.
func (s *sink) begin(id string, act sinkAct, remote net.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.began[id]++
	at := time.Now().UTC().Format("15:04:05.000")
	if !s.start.IsZero() {
		at = fmt.Sprintf("%.3fs", time.Since(s.start).Seconds())
	}
	s.stories[id] = append(s.stories[id], fmt.Sprintf("%s %s from %s", at, act, remote))
}

// setStart sets the instant the stories' times count from.
func (s *sink) setStart(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start = t
}

func (a sinkAct) String() string {
	switch a {
	case sinkAccept:
		return "kept, 250"
	case sinkTempFail:
		return "451"
	case sinkHangUpKept:
		return "kept, hung up"
	case sinkHangUpLost:
		return "dropped, hung up"
	case sinkLate:
		return "kept, late 250"
	}
	return fmt.Sprintf("act %d", int(a))
}

func (s *sink) record(to []string, id string) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total++
	if id != "" {
		s.ids[id]++
	} else {
		s.noID++
	}
	for _, r := range to {
		r = strings.ToLower(r)
		c := s.rcpts[r]
		if c == nil {
			c = &rcptCount{ids: map[string]int{}}
			s.rcpts[r] = c
		}
		c.n++
		c.last = now
		if id != "" {
			if c.ids[id]++; c.ids[id] > 1 {
				c.dups++
			}
		}
	}
}

// NewSession implements smtp.Backend.
func (s *sink) NewSession(c *smtp.Conn) (smtp.Session, error) {
	return &sinkSession{s: s, conn: c}, nil
}

type sinkSession struct {
	s    *sink
	conn *smtp.Conn
	to   []string
	act  sinkAct
}

func (ss *sinkSession) Mail(string, *smtp.MailOptions) error {
	ss.act = sinkAccept
	if f := ss.s.faults; f != nil {
		ss.act = f.pick()
	}
	return nil
}

func (ss *sinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if ss.act == sinkReject {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "sink: no such user (soak fault)"}
	}
	ss.to = append(ss.to, to)
	return nil
}

// Data reads the header block for the Message-ID and discards the rest.
func (ss *sinkSession) Data(r io.Reader) error {
	br := bufio.NewReader(r)
	h, err := textproto.NewReader(br).ReadMIMEHeader()
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("sink: reading header: %w", err)
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return fmt.Errorf("sink: reading body: %w", err)
	}
	id := strings.Trim(strings.TrimSpace(h.Get("Message-Id")), "<>")
	ss.s.begin(id, ss.act, ss.conn.Conn().RemoteAddr())
	switch ss.act {
	case sinkTempFail:
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "sink: try again later (soak fault)"}
	case sinkHangUpKept, sinkHangUpLost:
		if ss.act == sinkHangUpKept {
			ss.s.record(ss.to, id)
		}
		ss.conn.Conn().Close()
		return errors.New("sink: hung up after DATA (soak fault)")
	case sinkLate:
		ss.s.record(ss.to, id)
		t := time.NewTimer(min(ss.s.faults.late, sinkTimeout))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ss.s.done:
		}
		return nil
	}
	ss.s.record(ss.to, id)
	return nil
}

func (ss *sinkSession) Reset()        { ss.to = nil }
func (ss *sinkSession) Logout() error { return nil }
