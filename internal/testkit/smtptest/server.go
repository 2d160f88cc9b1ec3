package smtptest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// Bounds that keep a broken test from hanging.
const (
	ioTimeout     = 30 * time.Second // server read/write deadline per line
	maxDelayData  = 30 * time.Second // cap on Behaviour.DelayData
	drainTimeout  = 1 * time.Second  // how long cleanup waits for clients to hang up
	closeTimeout  = 5 * time.Second  // how long cleanup waits for handlers to exit
	pollInterval  = 5 * time.Millisecond
	serverDomain  = "localhost"
	errNotAuthMsg = "Authentication required"
)

// Message is one message the server accepted.
type Message struct {
	From string
	To   []string
	Data []byte // as received, dot-unstuffed, CRLF line endings kept
	// MessageID is the Message-ID header without its angle brackets, "" if
	// there is none or the header block does not parse.
	MessageID string
	Auth      string // user name that authenticated, "" if none
	TLS       bool   // the message came over TLS (implicit or STARTTLS)
	// RemoteIP is the client's address and Helo the name it gave in
	// EHLO (or HELO).
	RemoteIP, Helo string
}

// Options configures Start.
type Options struct {
	// Username and Password, when Username is set, make AUTH PLAIN
	// required (MAIL before AUTH gets 530) and checked (wrong gets 535).
	Username, Password string
	// TLSConfig, when set, makes the server offer STARTTLS, or with
	// ImplicitTLS speak TLS from the first byte.
	TLSConfig   *tls.Config
	ImplicitTLS bool
	// AllowInsecureAuth allows AUTH before STARTTLS when TLSConfig is set.
	// Without TLSConfig there is no other way, so AUTH is always allowed.
	AllowInsecureAuth bool
	// Addr is the listen address; default "127.0.0.1:0" (any address of
	// 127.0.0.0/8 works on Linux).
	Addr string
	// MaxConns, when set, is how many connections may be open at once: one
	// more is greeted "421 4.7.0 Too many concurrent SMTP connections" and
	// closed, as providers do (Refused counts them).
	MaxConns int
	// MaxMessagesPerConn and MaxRate, when set, are a provider's other
	// limits (limits.go): past MaxMessagesPerConn messages on one
	// connection the next MAIL gets 421 and the connection is closed;
	// past MaxRate messages a second (over the whole server) MAIL gets
	// Gmail's 421-4.7.28. Throttled counts both.
	MaxMessagesPerConn int
	MaxRate            float64
}

// Behaviour says how sessions answer. Each transaction takes a snapshot
// when it starts (at MAIL), so a change applies to sessions a client keeps
// open and reuses, as it would on a real server.
type Behaviour struct {
	// MailErr, RcptErr and DataErr answer MAIL, every RCPT, and the end of
	// DATA with this error (e.g. 451 or 550).
	MailErr, RcptErr, DataErr *smtp.SMTPError
	// RcptErrFor answers RCPT of these addresses (exactly as given) with
	// their error; the others are taken (or get RcptErr).
	RcptErrFor map[string]*smtp.SMTPError
	// RcptFunc, when set, is asked first about every RCPT with the
	// client's address and the envelope: a non-nil error answers it (a
	// greylister keeps its own table).
	RcptFunc func(remoteIP, from, to string) *smtp.SMTPError
	// HangUpAfterData reads the whole body, then closes the connection
	// without answering: the client sees the connection break after DATA
	// began. The message is not recorded.
	HangUpAfterData bool
	// HangUpAfterDataFor does it for transactions with one of these
	// recipients (exactly as given) only.
	HangUpAfterDataFor map[string]bool
	// HangUpBeforeData closes the connection when MAIL FROM arrives.
	HangUpBeforeData bool
	// DelayData sleeps before answering the end of DATA (capped at 30s, and
	// cut short by the end of the test, which answers 421). A message whose
	// delay ran out is recorded even if the client has gone by then: the
	// server accepted it, which is exactly the situation a client must
	// treat as ambiguous.
	DelayData time.Duration
	// HoldData, when set, holds the answer to the end of DATA until the
	// channel is closed (or the test ends, which answers 421): a test
	// that must act while a message is being handed over does it before
	// it closes the channel, whatever the machine's load.
	HoldData <-chan struct{}
	// ReadRate, when set, reads the body at about this many bytes a
	// second, as a slow or loaded link would (cut short by the end of the
	// test, which answers 421): the client's writes wait on it.
	ReadRate int
}

// Server is a running recording SMTP server on 127.0.0.1.
type Server struct {
	Addr string // "127.0.0.1:port"
	Host string // "127.0.0.1"
	Port string

	opts    Options
	closing chan struct{} // closed when cleanup starts

	mu        sync.Mutex
	behaviour Behaviour
	messages  []Message
	accepted  int
	refused   int
	peak      int
	limits    limitState
	holding   int // sessions whose end of DATA HoldData holds now
	open      map[*trackedConn]struct{}
	// conns counts the sessions; transcript is their commands.
	conns      int
	transcript []Command
}

// Start starts a server listening on 127.0.0.1:0. t.Cleanup closes it and
// fails the test if a client connection is still open when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.ImplicitTLS && opts.TLSConfig == nil {
		t.Fatal("smtptest: ImplicitTLS needs a TLSConfig")
	}
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("smtptest: listen: %v", err)
	}
	s := &Server{
		Addr:    ln.Addr().String(),
		opts:    opts,
		closing: make(chan struct{}),
		open:    make(map[*trackedConn]struct{}),
	}
	s.Host, s.Port, _ = net.SplitHostPort(s.Addr)

	logger := &testLogger{t: t}
	srv := smtp.NewServer(&backend{s: s})
	srv.Domain = serverDomain
	srv.TLSConfig = opts.TLSConfig
	srv.AllowInsecureAuth = opts.AllowInsecureAuth || opts.TLSConfig == nil
	srv.EnableSMTPUTF8 = true
	srv.ReadTimeout = ioTimeout
	srv.WriteTimeout = ioTimeout
	srv.ErrorLog = logger

	var l net.Listener = &trackingListener{Listener: ln, s: s}
	if opts.ImplicitTLS {
		l = tls.NewListener(l, opts.TLSConfig)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(l); err != nil && !errors.Is(err, net.ErrClosed) {
			logger.Printf("serve: %v", err)
		}
	}()

	t.Cleanup(func() {
		defer logger.stop()
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		close(s.closing)
		// Stop accepting first: go-smtp's Serve adds to a WaitGroup that
		// Shutdown waits on, and the two must not overlap.
		l.Close()
		select {
		case <-served:
		case <-ctx.Done():
			t.Errorf("smtptest: server did not stop accepting")
			return
		}
		// A well-behaved client has hung up already; give the handlers a
		// moment to see it.
		for deadline := time.Now().Add(drainTimeout); s.openCount() > 0 && time.Now().Before(deadline); {
			time.Sleep(pollInterval)
		}
		if n := s.openCount(); n > 0 {
			t.Errorf("smtptest: %d client connection(s) still open at the end of the test", n)
		}
		s.closeAll()
		// Shutdown waits for the connection handlers to return; closing the
		// already closed listener again is its only error.
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, net.ErrClosed) {
			t.Errorf("smtptest: shutdown: %v", err)
		}
	})
	return s
}

// Messages returns a copy of the accepted messages, in arrival order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, len(s.messages))
	for i, m := range s.messages {
		m.To = append([]string(nil), m.To...)
		m.Data = append([]byte(nil), m.Data...)
		out[i] = m
	}
	return out
}

// MessageIDCounts counts accepted messages per Message-ID; messages
// without one are not counted. A count above 1 is a duplicate send.
func (s *Server) MessageIDCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := make(map[string]int)
	for _, m := range s.messages {
		if m.MessageID != "" {
			counts[m.MessageID]++
		}
	}
	return counts
}

// SetBehaviour changes how sessions that start from now on answer.
func (s *Server) SetBehaviour(b Behaviour) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.behaviour = b
}

// Connections returns the number of connections accepted so far.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted
}

// Refused returns the connections turned away past Options.MaxConns.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// PeakConnections returns the most connections that were open at once.
func (s *Server) PeakConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// Disconnect closes every client connection from the server's side, as a
// relay does with clients idle too long.
func (s *Server) Disconnect() { s.closeAll() }

// Holding is how many sessions have sent a whole message and wait, held by
// Behaviour.HoldData, for the answer to it.
func (s *Server) Holding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holding
}

func (s *Server) hold(n int) {
	s.mu.Lock()
	s.holding += n
	s.mu.Unlock()
}

func (s *Server) openCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

func (s *Server) closeAll() {
	s.mu.Lock()
	conns := make([]*trackedConn, 0, len(s.open))
	for c := range s.open {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (s *Server) record(m Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages = append(s.messages, m)
}

type testLogger struct {
	mu      sync.Mutex
	t       testing.TB
	stopped bool
}

func (l *testLogger) Printf(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.t.Logf("smtptest: "+format, v...)
	}
}

func (l *testLogger) Println(v ...any) {
	l.Printf("%s", strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
}

func (l *testLogger) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
}
