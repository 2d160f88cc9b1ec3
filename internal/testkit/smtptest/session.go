package smtptest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// A session answers as the server's Behaviour says, and records what it
// accepted.

type backend struct{ s *Server }

func (b *backend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	b.s.mu.Lock()
	bh := b.s.behaviour
	b.s.conns++
	n := b.s.conns
	b.s.mu.Unlock()
	return &session{s: b.s, conn: c, b: bh, connNo: n}, nil
}

type session struct {
	s    *Server
	conn *smtp.Conn
	b    Behaviour

	auth string
	from string
	to   []string
	msgs int // messages taken on this connection
	// connNo numbers the session in the Transcript; inData is set once
	// the transaction's data began.
	connNo int
	inData bool
}

var _ smtp.AuthSession = (*session)(nil)

func (ss *session) AuthMechanisms() []string {
	if ss.s.opts.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (ss *session) Auth(mech string) (sasl.Server, error) {
	if ss.s.opts.Username == "" || !strings.EqualFold(mech, sasl.Plain) {
		return nil, smtp.ErrAuthUnknownMechanism
	}
	return sasl.NewPlainServer(func(identity, username, password string) error {
		if identity != "" && identity != username {
			return smtp.ErrAuthFailed
		}
		if username != ss.s.opts.Username || password != ss.s.opts.Password {
			return smtp.ErrAuthFailed
		}
		ss.auth = username
		return nil
	}), nil
}

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	ss.s.note(ss, "MAIL", from)
	ss.s.mu.Lock()
	ss.b = ss.s.behaviour
	ss.s.mu.Unlock()
	if ss.b.HangUpBeforeData {
		ss.conn.Conn().Close()
		return errors.New("smtptest: hung up on MAIL")
	}
	if ss.s.opts.Username != "" && ss.auth == "" {
		return &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: errNotAuthMsg}
	}
	if ss.b.MailErr != nil {
		return ss.b.MailErr
	}
	if err := ss.s.checkLimits(ss); err != nil {
		return err
	}
	ss.from = from
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	ss.s.note(ss, "RCPT", to)
	if ss.b.RcptFunc != nil {
		remote, _, _ := net.SplitHostPort(ss.conn.Conn().RemoteAddr().String())
		if e := ss.b.RcptFunc(remote, ss.from, to); e != nil {
			return e
		}
	}
	if e := ss.b.RcptErrFor[to]; e != nil {
		return e
	}
	if ss.b.RcptErr != nil {
		return ss.b.RcptErr
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *session) Data(r io.Reader) error {
	ss.s.note(ss, "DATA", "")
	ss.inData = true
	if ss.b.ReadRate > 0 {
		r = &slowReader{r: r, rate: ss.b.ReadRate, closing: ss.s.closing}
	}
	data, err := io.ReadAll(r)
	if errors.Is(err, errTestOver) {
		return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "smtptest: test over"}
	}
	if err != nil {
		return fmt.Errorf("smtptest: reading message: %w", err)
	}
	if ss.b.HangUpAfterData || slices.ContainsFunc(ss.to, func(r string) bool { return ss.b.HangUpAfterDataFor[r] }) {
		ss.conn.Conn().Close()
		return errors.New("smtptest: hung up after DATA")
	}
	if d := min(ss.b.DelayData, maxDelayData); d > 0 {
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ss.s.closing:
			return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "smtptest: test over"}
		}
	}
	if ss.b.HoldData != nil {
		ss.s.hold(1)
		select {
		case <-ss.b.HoldData:
			ss.s.hold(-1)
		case <-ss.s.closing:
			ss.s.hold(-1)
			return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "smtptest: test over"}
		}
	}
	if ss.b.DataErr != nil {
		return ss.b.DataErr
	}
	_, isTLS := ss.conn.TLSConnectionState()
	remote, _, _ := net.SplitHostPort(ss.conn.Conn().RemoteAddr().String())
	ss.s.record(Message{
		RemoteIP:  remote,
		Helo:      ss.conn.Hostname(),
		From:      ss.from,
		To:        append([]string(nil), ss.to...),
		Data:      data,
		MessageID: messageID(data),
		Auth:      ss.auth,
		TLS:       isTLS,
	})
	ss.s.tookMessage(ss)
	return nil
}

var errTestOver = errors.New("smtptest: test over")

// slowReader reads at about rate bytes a second: after each read it waits
// until the bytes read so far are due at that rate, however small the
// reads (the DATA reader returns about a line each).
type slowReader struct {
	r       io.Reader
	rate    int
	closing <-chan struct{}
	start   time.Time
	read    int64
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.start.IsZero() {
		s.start = time.Now()
	}
	n, err := s.r.Read(p)
	s.read += int64(n)
	if wait := time.Until(s.start.Add(time.Duration(s.read) * time.Second / time.Duration(s.rate))); wait > time.Millisecond {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-s.closing:
			return n, errTestOver
		}
	}
	return n, err
}

func (ss *session) Reset() {
	if ss.from != "" && !ss.inData {
		ss.s.note(ss, "RSET", "")
	}
	ss.inData = false
	ss.from = ""
	ss.to = nil
}

func (ss *session) Logout() error { return nil }

func messageID(data []byte) string {
	m, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		return ""
	}
	id := strings.TrimSpace(m.Header.Get("Message-Id"))
	return strings.TrimSuffix(strings.TrimPrefix(id, "<"), ">")
}

// testLogger sends go-smtp's log to the test log, and drops lines after
// the test is over (t.Logf would panic then).
