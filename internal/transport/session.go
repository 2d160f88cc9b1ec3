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
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/netpolicy"
)

// The steps of one SMTP session, shared by the relay (SMTP) and the mx
// transport (MX): connect, greeting, TLS, EHLO, AUTH (session), MAIL and
// RCPT (envelope), DATA (data), and the one classification of what went
// wrong (fail).

// attempt is the state of one Deliver call.
type attempt struct {
	cfg     *SMTPConfig
	stage   string
	reached bool // the server sent its greeting
	// dataStarted is set once DATA got its 354: from then on, a lost
	// connection leaves the outcome unknown.
	dataStarted bool
	client      *smtp.Client
	// perRecipient (the mx transport's Send): a 5xx to one RCPT is
	// that recipient's refusal, kept in refused, and the others go on;
	// accepted are the RCPTs answered 2xx.
	perRecipient bool
	refused      []Refusal
	accepted     []string
	// deferRcpt (per-destination delivery): a 4xx to one RCPT is that
	// recipient's deferral, kept in deferred, and the others go on.
	deferRcpt bool
	deferred  []Refusal
	// secure: the session runs over TLS.
	secure bool
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
	a.secure = conn.secure
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
			if a.deferRcpt && errors.As(err, &se) && se.Code/100 == 4 {
				a.deferred = append(a.deferred, Refusal{Recipient: to, Err: &Error{Class: Temporary, Stage: StageRcpt,
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
	case errors.Is(err, netpolicy.ErrBlocked):
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
