package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/outbound"
)

// quitTimeout bounds the courtesy QUIT: once the outcome is known, a slow
// server must not hold the attempt for a full CommandTimeout.
const quitTimeout = 10 * time.Second

// SMTP delivers to one relay over SMTP. It is safe for concurrent use.
//
// With MaxIdle set it keeps sessions open between messages: a session
// whose message was accepted goes back to the pool, and the next Deliver
// takes it, says RSET — which also proves it still alive — and sends its
// message without a new connect, greeting, TLS handshake, EHLO and AUTH.
// A session that failed in any way is closed, never reused. A session
// found dead at RSET costs nothing but a new one: no message was started
// on it. MaxSessions bounds the sessions open at once.
type SMTP struct {
	cfg SMTPConfig
	sem chan struct{} // one token per open session; nil: no bound

	mu     sync.Mutex
	idle   []*session // most recently used last
	closed bool
}

var _ Transport = (*SMTP)(nil)

// session is an open, authenticated relay session between messages.
type session struct {
	c      *smtp.Client
	nc     net.Conn // the connection go-smtp uses (deadlines)
	raw    net.Conn // the socket (closing aborts everything)
	opened time.Time
	idled  time.Time
}

// NewSMTP returns a relay transport. Configuration errors (no host, unknown
// TLS mode) are reported by Deliver as Temporary errors at the dial stage,
// since they are fixed by the operator, not by changing the message.
func NewSMTP(cfg SMTPConfig) *SMTP {
	s := &SMTP{cfg: cfg.withDefaults()}
	if s.cfg.MaxSessions > 0 {
		s.sem = make(chan struct{}, s.cfg.MaxSessions)
	}
	return s
}

// Close ends the idle sessions (with QUIT) and stops keeping new ones.
func (s *SMTP) Close() error {
	s.mu.Lock()
	idle := s.idle
	s.idle, s.closed = nil, true
	s.mu.Unlock()
	for _, ss := range idle {
		s.quit(ss)
	}
	return nil
}

func (s *SMTP) quit(ss *session) {
	ss.c.CommandTimeout = min(s.cfg.CommandTimeout, quitTimeout)
	_ = ss.c.Quit()
	ss.raw.Close()
}

// take returns an idle session young enough to reuse, nil when there is
// none; it closes the ones past their time.
func (s *SMTP) take() *session {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.idle) > 0 {
		ss := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		if now.Sub(ss.idled) < s.cfg.IdleTimeout && now.Sub(ss.opened) < s.cfg.MaxSessionAge {
			return ss
		}
		ss.raw.Close() // the relay may have dropped it already: no QUIT
	}
	return nil
}

// put keeps a session whose message was accepted, or ends it.
func (s *SMTP) put(ss *session) {
	now := time.Now()
	if err := ss.nc.SetDeadline(time.Time{}); err == nil && now.Sub(ss.opened) < s.cfg.MaxSessionAge {
		s.mu.Lock()
		if !s.closed && len(s.idle) < s.cfg.MaxIdle {
			ss.idled = now
			s.idle = append(s.idle, ss)
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
	s.quit(ss)
}

// Deliver sends one message. It returns nil only when the server answered
// 2xx to the end of DATA; otherwise it returns an *Error classified as
// described in the package documentation.
//
// Multiple recipients are all-or-nothing: the first RCPT refused aborts the
// attempt (4xx Temporary, 5xx Permanent) before DATA, so a retry never sends
// the message to the recipients that were accepted.
func (s *SMTP) Deliver(ctx context.Context, env Envelope, raw []byte) error {
	if err := s.precheck(env); err != nil {
		return err
	}
	if s.sem != nil {
		select {
		case s.sem <- struct{}{}:
			defer func() { <-s.sem }()
		case <-ctx.Done():
			return &Error{Class: Temporary, Stage: StageDial, Err: fmt.Errorf("waiting for a free session: %w", context.Cause(ctx))}
		}
	}
	return s.deliver(ctx, env, raw)
}

// Slot is one of a relay's MaxSessions, taken without waiting for it.
// Delivery takes a slot before it commits an attempt as sending, so that
// no attempt the database calls sending waits for a session: a crash then
// leaves unknown only attempts that had a session in hand and were about
// to hand their message over, never ones queued behind the pool.
type Slot struct {
	s    *SMTP
	once sync.Once
}

// TryAcquire takes one of the relay's MaxSessions if one is free; ok is
// false when all are in use. Without MaxSessions it always succeeds.
func (s *SMTP) TryAcquire() (sl *Slot, ok bool) {
	if s.sem != nil {
		select {
		case s.sem <- struct{}{}:
		default:
			return nil, false
		}
	}
	return &Slot{s: s}, true
}

// Of reports whether the slot is one of t's sessions.
func (sl *Slot) Of(t Transport) bool { return t == Transport(sl.s) }

// Release gives the slot back. It is safe to call more than once, and
// after Deliver.
func (sl *Slot) Release() {
	sl.once.Do(func() {
		if sl.s.sem != nil {
			<-sl.s.sem
		}
	})
}

// Deliver sends one message as SMTP.Deliver does, on the slot instead of
// waiting for one, and releases the slot.
func (sl *Slot) Deliver(ctx context.Context, env Envelope, raw []byte) error {
	defer sl.Release()
	if err := sl.s.precheck(env); err != nil {
		return err
	}
	return sl.s.deliver(ctx, env, raw)
}

// precheck refuses, before any session is taken, what no session could
// send: a broken configuration, an impossible envelope.
func (s *SMTP) precheck(env Envelope) error {
	if err := s.cfg.validate(); err != nil {
		return &Error{Class: Temporary, Stage: StageDial, Err: fmt.Errorf("invalid transport configuration: %w", err)}
	}
	if stage, err := checkEnvelope(env); err != nil {
		return &Error{Class: Permanent, Stage: stage, Err: err}
	}
	return nil
}

// deliver sends one message on a pooled session or a new one; the caller
// holds one of the MaxSessions.
func (s *SMTP) deliver(ctx context.Context, env Envelope, raw []byte) error {
	for ss := s.take(); ss != nil; ss = s.take() {
		a := &attempt{cfg: &s.cfg, stage: StageRset, reached: true, client: ss.c}
		stop := context.AfterFunc(ctx, func() { ss.raw.Close() })
		ss.c.CommandTimeout = s.cfg.CommandTimeout
		if err := ss.c.Reset(); err != nil {
			// Dead or confused: nothing of this message was sent on it.
			stop()
			ss.raw.Close()
			if ctx.Err() != nil {
				return a.fail(ctx, err)
			}
			continue
		}
		err := a.transaction(ctx, ss, env, raw)
		if !stop() || err != nil {
			ss.raw.Close()
			return err
		}
		s.put(ss)
		return nil
	}
	a := &attempt{cfg: &s.cfg, stage: StageDial}
	ss, stop, err := a.session(ctx)
	if err != nil {
		return err
	}
	err = a.transaction(ctx, ss, env, raw)
	if !stop() || err != nil {
		ss.raw.Close()
		return err
	}
	s.put(ss)
	return nil
}

// checkEnvelope refuses envelopes no server could ever accept, so that they
// fail permanently instead of being retried forever.
func checkEnvelope(env Envelope) (stage string, err error) {
	if err := checkAddress(env.From); err != nil {
		return StageMail, fmt.Errorf("invalid envelope sender: %w", err)
	}
	if len(env.To) == 0 {
		return StageRcpt, errors.New("envelope has no recipients")
	}
	for _, to := range env.To {
		if to == "" {
			return StageRcpt, errors.New("empty envelope recipient")
		}
		if err := checkAddress(to); err != nil {
			return StageRcpt, fmt.Errorf("invalid envelope recipient: %w", err)
		}
	}
	return "", nil
}

func checkAddress(addr string) error {
	// Only what would break the command line; the server judges the rest.
	if strings.ContainsAny(addr, "\r\n<>") {
		return fmt.Errorf("%q is not a bare address", addr)
	}
	return nil
}

// attempt is the state of one Deliver call.
type attempt struct {
	cfg     *SMTPConfig
	stage   string
	reached bool // the server sent its greeting
	// dataStarted is set once DATA got its 354: from then on, a lost
	// connection leaves the outcome unknown.
	dataStarted bool
	client      *smtp.Client
	// perRecipient (the mx transport's DeliverEach): a 5xx to one RCPT is
	// that recipient's refusal, kept in refused, and the others go on;
	// accepted are the RCPTs answered 2xx.
	perRecipient bool
	refused      []Refusal
	accepted     []string
}

// session takes a relay session as far as a Deliver and a Probe share:
// connect, greeting, TLS as configured, EHLO, AUTH. While ctx lives, its
// end closes the socket; stop ends that watch and reports whether it was
// still in time (false: the socket is being closed). On error everything
// is closed.
func (a *attempt) session(ctx context.Context) (ss *session, stop func() bool, err error) {
	cfg := a.cfg
	rawConn, err := cfg.dial(ctx)
	if err != nil {
		return nil, nil, a.fail(ctx, err)
	}
	// go-smtp has no context: closing the socket is the only way to abort a
	// blocked read or write. Closing is safe while other goroutines use it.
	stop = context.AfterFunc(ctx, func() { rawConn.Close() })
	failed := func(err error) (*session, func() bool, error) {
		e := a.fail(ctx, err) // may still say QUIT: close afterwards
		stop()
		rawConn.Close()
		return nil, nil, e
	}

	conn, err := a.open(ctx, rawConn)
	if err != nil {
		return failed(err)
	}
	c := smtp.NewClient(conn.client)
	a.client = c
	c.CommandTimeout = cfg.CommandTimeout
	c.SubmissionTimeout = cfg.DataTimeout

	a.stage = StageEHLO
	if err := c.Hello(cfg.HELOName); err != nil {
		return failed(err)
	}
	if cfg.Username != "" {
		a.stage = StageAuth
		if err := a.auth(c, conn.secure); err != nil {
			return failed(err)
		}
	}
	now := time.Now()
	return &session{c: c, nc: conn.client, raw: rawConn, opened: now, idled: now}, stop, nil
}

// transaction sends one message on an open session: MAIL, RCPT, DATA. It
// leaves the session ready for the next message when it returns nil.
func (a *attempt) transaction(ctx context.Context, ss *session, env Envelope, raw []byte) error {
	if err := a.envelope(ctx, ss, env, len(raw)); err != nil {
		return err
	}
	return a.data(ctx, ss, raw)
}

// envelope says MAIL and RCPT: after it, the session holds a transaction
// that QUIT or RSET discards without a trace. The relay and the mx
// transport share it.
func (a *attempt) envelope(ctx context.Context, ss *session, env Envelope, size int) error {
	cfg := a.cfg
	c := ss.c
	c.CommandTimeout = cfg.CommandTimeout
	c.SubmissionTimeout = cfg.DataTimeout

	a.stage = StageMail
	opts := &smtp.MailOptions{Size: int64(size)}
	if !isASCII(env.From) || !allASCII(env.To) {
		if ok, _ := c.Extension("SMTPUTF8"); !ok {
			return a.fail(ctx, permanent{errors.New("envelope has non-ASCII addresses and the server does not support SMTPUTF8")})
		}
		opts.UTF8 = true
	}
	if err := c.Mail(env.From, opts); err != nil {
		return a.fail(ctx, err)
	}

	a.stage = StageRcpt
	for _, to := range env.To {
		if err := c.Rcpt(to, nil); err != nil {
			var se *smtp.SMTPError
			if a.perRecipient && errors.As(err, &se) && se.Code/100 == 5 {
				a.refused = append(a.refused, Refusal{Recipient: to, Err: &Error{Class: Permanent, Stage: StageRcpt,
					Reached: true, Code: se.Code, Err: fmt.Errorf("recipient <%s>: %w", to, err)}})
				continue
			}
			return a.fail(ctx, fmt.Errorf("recipient <%s>: %w", to, err))
		}
		a.accepted = append(a.accepted, to)
	}
	return nil
}

// data sends the message of the transaction envelope opened. From the 354
// on, a lost connection leaves the outcome unknown (Ambiguous).
func (a *attempt) data(ctx context.Context, ss *session, raw []byte) error {
	cfg := a.cfg
	c, nc := ss.c, ss.nc
	a.stage = StageData
	w, err := c.Data()
	if err != nil {
		return a.fail(ctx, err)
	}
	a.dataStarted = true
	a.stage = StageDataEnd

	// go-smtp sets no deadline while the body is written, and only its own
	// SubmissionTimeout for the final reply; one deadline bounds both.
	deadline := time.Now().Add(cfg.DataTimeout)
	if err := nc.SetDeadline(deadline); err != nil {
		return a.fail(ctx, err)
	}
	if _, err := w.Write(raw); err != nil {
		return a.fail(ctx, err)
	}
	c.SubmissionTimeout = max(time.Until(deadline), time.Millisecond)
	// Close writes the final dot and reads the reply: a reply other than 250
	// is an *smtp.SMTPError (classified by code), anything else is a
	// network failure, which fail classifies as Ambiguous.
	if err := w.Close(); err != nil {
		// go-smtp wants exactly 250, but any 2xx means the server took it.
		var se *smtp.SMTPError
		if !errors.As(err, &se) || se.Code/100 != 2 {
			return a.fail(ctx, err)
		}
	}
	return nil
}

// fail classifies err exactly once and, when the session is still in a
// known state (the server answered with an error), ends it politely.
func (a *attempt) fail(ctx context.Context, err error) error {
	e := &Error{Stage: a.stage, Reached: a.reached, Err: err}
	var se *smtp.SMTPError
	var perm permanent
	switch {
	case errors.As(err, &se):
		e.Code = se.Code
		switch se.Code / 100 {
		case 4:
			e.Class = Temporary
		case 5:
			e.Class = Permanent
		default:
			// A reply outside 4xx/5xx where an answer was expected is a
			// protocol violation: treat it like a broken connection.
			e.Class = Temporary
			if a.dataStarted {
				e.Class = Ambiguous
			}
		}
	case errors.As(err, &perm):
		e.Class = Permanent
		e.Err = perm.err
	case errors.Is(err, outbound.ErrBlocked):
		// The destination is not one sendonce may reach: no retry will
		// change that until the operator changes --outbound-allow.
		e.Class = Permanent
	case a.dataStarted:
		e.Class = Ambiguous
	default:
		e.Class = Temporary
	}
	if ctx.Err() != nil && e.Code == 0 {
		// The socket was closed under go-smtp; say why.
		e.Err = fmt.Errorf("%w: %w", context.Cause(ctx), e.Err)
	}
	if pw := a.cfg.Password; pw != "" && strings.Contains(e.Err.Error(), pw) {
		e.Err = redacted{err: e.Err, password: pw}
	}
	if se != nil && a.client != nil && ctx.Err() == nil {
		a.client.CommandTimeout = min(a.cfg.CommandTimeout, quitTimeout)
		_ = a.client.Quit()
	}
	return e
}

// openConn is the connection handed to go-smtp.
type openConn struct {
	client net.Conn // what go-smtp reads and writes
	secure bool     // TLS is in effect
}

// open establishes TLS as configured and reads the greeting itself, so
// that Reached is exact and STARTTLS can be decided after seeing the EHLO
// reply: go-smtp v0.26's client has no exported StartTLS for an existing
// Client, and its NewClientStartTLS closes the connection when STARTTLS is
// not offered, which opportunistic mode must survive. The greeting is then
// replayed to go-smtp, which goes on with its own EHLO.
func (a *attempt) open(ctx context.Context, rawConn net.Conn) (openConn, error) {
	cfg := a.cfg
	var conn net.Conn = rawConn
	secure := false

	if cfg.TLS == TLSImplicit {
		a.stage = StageTLS
		tc := tls.Client(rawConn, cfg.tlsConfig())
		if err := handshake(ctx, tc, cfg.DialTimeout); err != nil {
			return openConn{}, fmt.Errorf("TLS handshake: %w", err)
		}
		conn, secure = tc, true
	}

	a.stage = StageGreeting
	br := bufio.NewReader(conn)
	tp := textproto.NewReader(br)
	if err := conn.SetDeadline(time.Now().Add(cfg.CommandTimeout)); err != nil {
		return openConn{}, err
	}
	if _, _, err := tp.ReadResponse(220); err != nil {
		var pe *textproto.Error
		if errors.As(err, &pe) {
			a.reached = true
			return openConn{}, &smtp.SMTPError{Code: pe.Code, Message: pe.Msg}
		}
		return openConn{}, err
	}
	a.reached = true

	if cfg.TLS == TLSStartTLS || cfg.TLS == TLSOpportunistic {
		tc, err := a.startTLS(ctx, conn, br, tp)
		if err != nil {
			return openConn{}, err
		}
		if tc != nil {
			conn, br, secure = tc, bufio.NewReader(tc), true
		}
	}

	if err := conn.SetDeadline(time.Time{}); err != nil {
		return openConn{}, err
	}
	return openConn{
		client: &replayConn{Conn: conn, r: io.MultiReader(strings.NewReader("220 greeting already read\r\n"), br)},
		secure: secure,
	}, nil
}

// startTLS runs EHLO and, if the server offers it, STARTTLS. It returns a
// nil conn when opportunistic mode goes on in plain text.
func (a *attempt) startTLS(ctx context.Context, conn net.Conn, br *bufio.Reader, tp *textproto.Reader) (*tls.Conn, error) {
	cfg := a.cfg
	w := textproto.NewWriter(bufio.NewWriter(conn))

	a.stage = StageEHLO
	if err := conn.SetDeadline(time.Now().Add(cfg.CommandTimeout)); err != nil {
		return nil, err
	}
	if err := w.PrintfLine("EHLO %s", cfg.HELOName); err != nil {
		return nil, err
	}
	_, msg, err := tp.ReadResponse(250)
	if err != nil {
		var pe *textproto.Error
		if !errors.As(err, &pe) {
			return nil, err
		}
		// 500/502: an old server without EHLO, hence without STARTTLS.
		// go-smtp falls back to HELO on its own.
		if cfg.TLS == TLSOpportunistic && (pe.Code == 500 || pe.Code == 502) {
			return nil, nil
		}
		if cfg.TLS == TLSStartTLS && (pe.Code == 500 || pe.Code == 502) {
			a.stage = StageTLS
			return nil, errors.New("server does not support EHLO, so no STARTTLS; refusing to continue without TLS")
		}
		return nil, &smtp.SMTPError{Code: pe.Code, Message: pe.Msg}
	}
	if !hasExtension(msg, "STARTTLS") {
		if cfg.TLS == TLSStartTLS {
			a.stage = StageTLS
			return nil, errors.New("server does not offer STARTTLS; refusing to continue without TLS")
		}
		return nil, nil
	}

	a.stage = StageTLS
	if err := w.PrintfLine("STARTTLS"); err != nil {
		return nil, err
	}
	if _, _, err := tp.ReadResponse(220); err != nil {
		var pe *textproto.Error
		if errors.As(err, &pe) {
			return nil, &smtp.SMTPError{Code: pe.Code, Message: pe.Msg}
		}
		return nil, err
	}
	// Bytes that arrived before the handshake would be read as if they had
	// come over TLS (the STARTTLS command-injection class of bugs).
	if br.Buffered() > 0 {
		return nil, errors.New("server sent data before the TLS handshake")
	}
	tc := tls.Client(conn, cfg.tlsConfig())
	if err := handshake(ctx, tc, cfg.CommandTimeout); err != nil {
		return nil, fmt.Errorf("STARTTLS handshake: %w", err)
	}
	return tc, nil
}

func handshake(ctx context.Context, tc *tls.Conn, timeout time.Duration) error {
	if err := tc.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		return err
	}
	return tc.SetDeadline(time.Time{})
}

// hasExtension looks for ext in an EHLO reply as returned by textproto (one
// line per extension, the first being the greeting text).
func hasExtension(msg, ext string) bool {
	lines := strings.Split(msg, "\n")
	for _, line := range lines[1:] {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if strings.EqualFold(name, ext) {
			return true
		}
	}
	return false
}

func (a *attempt) auth(c *smtp.Client, secure bool) error {
	cfg := a.cfg
	if !secure && cfg.TLS != TLSNone {
		return errors.New("refusing to send credentials over an unencrypted connection (tls=none would allow it)")
	}
	if ok, _ := c.Extension("AUTH"); !ok {
		return errors.New("server does not offer AUTH")
	}
	var sc sasl.Client
	switch {
	case c.SupportsAuth(sasl.Plain):
		sc = sasl.NewPlainClient("", cfg.Username, cfg.Password)
	case c.SupportsAuth(sasl.Login):
		sc = sasl.NewLoginClient(cfg.Username, cfg.Password)
	default:
		_, mechs := c.Extension("AUTH")
		return fmt.Errorf("server offers neither AUTH PLAIN nor LOGIN (offers %q)", mechs)
	}
	if err := c.Auth(sc); err != nil {
		return fmt.Errorf("AUTH as %q: %w", cfg.Username, err)
	}
	return nil
}

// replayConn hands go-smtp a greeting that was already read, followed by
// whatever the reader buffered after it.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// permanent marks a local failure that no retry can fix.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// redacted hides a password an error message happened to contain (a server
// echoing a credential, say) while keeping the chain for errors.As.
type redacted struct {
	err      error
	password string
}

func (r redacted) Error() string { return strings.ReplaceAll(r.err.Error(), r.password, "xxxxx") }
func (r redacted) Unwrap() error { return r.err }

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func allASCII(ss []string) bool {
	for _, s := range ss {
		if !isASCII(s) {
			return false
		}
	}
	return true
}
