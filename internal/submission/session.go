package submission

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/mail"
	"sync"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/connlimit"
	"github.com/sendonce/sendonce/internal/core"
)

// session is one client connection between EHLO and its end.
type session struct {
	s        *Server
	conn     *smtp.Conn
	loopback bool
	once     sync.Once

	key *core.APIKey
	// secret is the key's secret, kept for the session's life so that
	// every transaction checks the key again (a key revoked mid-session
	// stops within app.KeyCacheTTL, as on HTTP). Never logged.
	secret    string
	mailFrom  string
	mailboxID string
	rcpt      []string
}

var (
	errAuthRequired = &smtp.SMTPError{Code: 530, EnhancedCode: smtp.EnhancedCode{5, 7, 0}, Message: "authentication required: AUTH PLAIN or LOGIN with an API key of scope send as the password"}
	errAuthNeedsTLS = &smtp.SMTPError{Code: 523, EnhancedCode: smtp.EnhancedCode{5, 7, 10}, Message: "AUTH needs TLS (STARTTLS) from a client that is not on a loopback address"}
	errAuthFailed   = &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "authentication failed: the password must be an API key with scope send"}
	errKeySessions  = &smtp.SMTPError{Code: 454, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "this API key has too many SMTP sessions open; try again later"}
	errBadSender    = &smtp.SMTPError{Code: 553, EnhancedCode: smtp.EnhancedCode{5, 1, 7}, Message: "the sender address is not a valid address"}
	errBadRecipient = &smtp.SMTPError{Code: 553, EnhancedCode: smtp.EnhancedCode{5, 1, 3}, Message: "the recipient address is not a valid address"}
	errTempFailure  = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "temporary failure; nothing was accepted, try again"}
)

// authAllowed is the contract's rule: AUTH over TLS, or from loopback.
func (ss *session) authAllowed() bool {
	_, tls := ss.conn.TLSConnectionState()
	return tls || ss.loopback
}

// AuthMechanisms implements smtp.AuthSession: AUTH is advertised only
// where it is allowed.
func (ss *session) AuthMechanisms() []string {
	if !ss.authAllowed() {
		return nil
	}
	return []string{sasl.Plain, sasl.Login}
}

// Auth implements smtp.AuthSession. The user name is ignored; the
// password is the API key.
func (ss *session) Auth(mech string) (sasl.Server, error) {
	if !ss.authAllowed() {
		return nil, ss.fail(errAuthNeedsTLS)
	}
	check := func(password string) error { return ss.authenticate(password) }
	switch mech {
	case sasl.Plain:
		return sasl.NewPlainServer(func(_, _, password string) error { return check(password) }), nil
	case sasl.Login:
		return newLoginServer(check), nil
	}
	return nil, ss.fail(smtp.ErrAuthUnknownMechanism)
}

func (ss *session) authenticate(secret string) error {
	ctx, cancel := context.WithTimeout(context.Background(), ss.s.cfg.CommandTimeout)
	defer cancel()
	key, err := ss.s.svc.Authenticate(ctx, secret)
	if err != nil {
		if core.ErrorCode(err) == core.CodeUnauthorized {
			return ss.fail(errAuthFailed)
		}
		ss.s.logger.ErrorContext(ctx, "smtp auth", slog.Any("error", err))
		return ss.fail(errTempFailure)
	}
	if !key.Has(core.ScopeSend) {
		return ss.fail(errAuthFailed)
	}
	if !ss.s.enterKey(key.ID) {
		return ss.fail(errKeySessions)
	}
	ss.key, ss.secret = key, secret
	if c := connlimit.Of(ss.conn.Conn()); c != nil {
		c.Release() // no longer a stranger: lifts the deadline to AUTH
	}
	return nil
}

// Mail implements smtp.Session: the sender must be one the key may use.
func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	if err := ss.envelopeAddr(from, errBadSender); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), ss.s.cfg.CommandTimeout)
	defer cancel()
	key, err := ss.s.svc.Authenticate(ctx, ss.secret)
	if err != nil {
		if core.ErrorCode(err) == core.CodeUnauthorized {
			return ss.fail(errAuthFailed) // revoked since AUTH
		}
		return ss.fail(replyFor(ctx, ss.s.logger, err))
	}
	ss.key = key
	id, err := ss.s.svc.SubmissionMailbox(ctx, ss.key, from)
	if err != nil {
		return ss.fail(replyFor(ctx, ss.s.logger, err))
	}
	ss.mailFrom, ss.mailboxID, ss.rcpt = from, id, nil
	return nil
}

// envelopeAddr is the check MAIL and RCPT share: the session has
// authenticated, and addr is a bare address (bad is the refusal when it
// is not). It returns error, not *smtp.SMTPError, so that nil is nil.
func (ss *session) envelopeAddr(addr string, bad *smtp.SMTPError) error {
	if ss.key == nil {
		return ss.fail(errAuthRequired)
	}
	if a, err := mail.ParseAddress("<" + addr + ">"); err != nil || a.Address != addr {
		return ss.fail(bad)
	}
	return nil
}

// Rcpt implements smtp.Session. The key's recipient allowlist answers
// here already (it is checked again, with the message, at DATA).
func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if err := ss.envelopeAddr(to, errBadRecipient); err != nil {
		return err
	}
	if len(ss.key.AllowRecipients) > 0 && !app.RecipientAllowed(ss.key.AllowRecipients, to) {
		return ss.fail(&smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1},
			Message: "this API key may not mail " + to + ": it is not on the key's recipient allowlist"})
	}
	ss.rcpt = append(ss.rcpt, to)
	return nil
}

// Data implements smtp.Session: the message is accepted, durably, before
// the reply is returned; the reply names the send.
func (ss *session) Data(r io.Reader) error {
	if ss.key == nil {
		return ss.fail(errAuthRequired)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		var se *smtp.SMTPError
		if errors.As(err, &se) {
			return ss.fail(se) // 552: past the size limit
		}
		return err // the connection broke: there is nobody to answer
	}
	ctx, cancel := context.WithTimeout(context.Background(), ss.s.cfg.AcceptTimeout)
	defer cancel()
	rep := ss.s.submit(ctx, ss.key, envelope{from: ss.mailFrom, mailbox: ss.mailboxID, rcpt: ss.rcpt}, data)
	if rep.Code != 250 {
		ss.s.reject(rep.Code)
	}
	// go-smtp writes an *SMTPError as the reply, whatever its code: how
	// a 250 carries the send's id.
	return rep
}

// Reset implements smtp.Session: the transaction ends, the AUTH stays.
func (ss *session) Reset() { ss.mailFrom, ss.mailboxID, ss.rcpt = "", "", nil }

// Logout implements smtp.Session; go-smtp may call it twice (STARTTLS,
// then the close).
func (ss *session) Logout() error {
	ss.once.Do(func() {
		if ss.s.metrics != nil {
			ss.s.metrics.SMTPSessionsOpen.Dec()
		}
		if ss.key != nil {
			ss.s.leaveKey(ss.key.ID)
		}
	})
	return nil
}

// fail counts a refusal and returns it.
func (ss *session) fail(e *smtp.SMTPError) *smtp.SMTPError {
	ss.s.reject(e.Code)
	return e
}
