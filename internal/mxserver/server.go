package mxserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/connlimit"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/defaults"
	"github.com/sendonce/sendonce/internal/inmail"
	"github.com/sendonce/sendonce/internal/verp"
)

// DefaultMaxBytes bounds one inbound message: a DSN returning a whole
// message with attachments fits; anything larger is refused with 552.
const DefaultMaxBytes = 10 << 20

// maxRecipients bounds RCPT TO per message (452 past it, RFC 5321 4.5.3.1.10).
const maxRecipients = 50

// Connection bounds: a stranger can open connections, each holding up to
// a message in memory while it is read.
const (
	DefaultMaxConns      = 100
	DefaultMaxConnsPerIP = 10
	// DefaultMaxMemory bounds the message bytes all sessions hold at
	// once: 25 full-size messages. Past it DATA is answered 452 4.3.1
	// and the sender tries again later, as with a full disk.
	DefaultMaxMemory = 256 << 20
	// DefaultSessionTimeout is a session's absolute deadline: a sender
	// that moves a message every 100 seconds keeps a slot no longer.
	DefaultSessionTimeout = 10 * time.Minute
	// DefaultMaxIdleCommands bounds the commands outside a transaction
	// (NOOP, RSET, HELO, VRFY…) between two messages; a transaction's
	// own (RCPT up to maxRecipients, DATA) are not counted.
	DefaultMaxIdleCommands = 100
)

// Config is the listener's settings.
type Config struct {
	// Signer reads bounce addresses; nil when there is no --bounce-domain
	// (the listener then takes receiving addresses only).
	Signer *verp.Signer
	// Receiver stores mail for receiving addresses and applies the
	// reports that come back to bounce addresses.
	Receiver Receiver
	// Unsubscriber takes mail to the unsubscribe headers' mailto: form,
	// unsubscribe+TOKEN@UnsubscribeDomain; nil or "" refuses it.
	Unsubscriber      Unsubscriber
	UnsubscribeDomain string
	// Checker runs SPF, DKIM and DMARC on received mail; nil skips them.
	Checker *inmail.Checker
	// RejectDMARCFail answers 550 to a message that fails DMARC instead of
	// keeping it flagged.
	RejectDMARCFail bool
	Domain          string // the name the listener greets with
	// TLS, when set, makes the listener offer STARTTLS (senders use it
	// whenever offered; MTA-STS for a receiving domain requires it).
	TLS      *tls.Config
	Logger   *slog.Logger
	MaxBytes int64 // default DefaultMaxBytes
	Now      func() time.Time
	Limits
}

// Limits bound what strangers may hold of the listener; a zero field is
// its default.
type Limits struct {
	MaxConns      int // default DefaultMaxConns
	MaxConnsPerIP int // per IPv4 address or IPv6 /64; default DefaultMaxConnsPerIP
	// MaxMemory bounds the bytes of messages being read and stored at
	// once, over all sessions (--inbound-max-memory); default
	// DefaultMaxMemory.
	MaxMemory int64
	// SessionTimeout is each session's absolute deadline
	// (--inbound-session-timeout); default DefaultSessionTimeout.
	SessionTimeout time.Duration
	// MaxIdleCommands bounds a session's commands outside a transaction
	// since its last message; default DefaultMaxIdleCommands.
	MaxIdleCommands int
}

// Receiver is what the listener needs of the use cases.
type Receiver interface {
	ReceivingRoute(ctx context.Context, address string) (*core.ReceivingAddress, error)
	Receive(ctx context.Context, in app.Incoming) (app.Received, error)
	RecordBounceReport(ctx context.Context, m app.BounceReport) (app.ReportResult, error)
}

// Unsubscriber is what the listener needs of the unsubscribe use case
// (app.Service).
type Unsubscriber interface {
	CheckUnsubscribe(ctx context.Context, token string) error
	Unsubscribe(ctx context.Context, token, via string) (bool, error)
}

// Server is the SMTP listener of --inbound-addr.
type Server struct {
	cfg    Config
	smtp   *smtp.Server
	memory *budget
}

// New returns a listener; Serve starts it.
func New(cfg Config) *Server {
	defaults.Set(&cfg.MaxBytes, DefaultMaxBytes)
	defaults.Set(&cfg.MaxConns, DefaultMaxConns)
	defaults.Set(&cfg.MaxConnsPerIP, DefaultMaxConnsPerIP)
	defaults.Set(&cfg.MaxMemory, DefaultMaxMemory)
	defaults.Set(&cfg.SessionTimeout, DefaultSessionTimeout)
	defaults.Set(&cfg.MaxIdleCommands, DefaultMaxIdleCommands)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Domain == "" && cfg.Signer != nil {
		cfg.Domain = cfg.Signer.Domain()
	}
	if cfg.Domain == "" {
		cfg.Domain = "localhost"
	}
	s := &Server{cfg: cfg, memory: newBudget(cfg.MaxMemory)}
	srv := smtp.NewServer(backend{s})
	srv.Domain = cfg.Domain
	srv.MaxMessageBytes = cfg.MaxBytes
	srv.MaxRecipients = maxRecipients
	// A read timeout makes go-smtp set a read deadline before each
	// command line: the listener counts commands by it (limit.go).
	srv.ReadTimeout, srv.WriteTimeout = 2*time.Minute, 2*time.Minute
	srv.EnableSMTPUTF8 = true
	srv.TLSConfig = cfg.TLS
	srv.ErrorLog = slogAdapter{cfg.Logger}
	s.smtp = srv
	return s
}

// Serve accepts connections on l until Close, at most MaxConns at once
// (ending the session idle the longest for a newcomer) and MaxConnsPerIP
// from one client, each for at most SessionTimeout.
func (s *Server) Serve(l net.Listener) error {
	err := s.smtp.Serve(s.limiter().Listen(l))
	if errors.Is(err, smtp.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops the listener, ending open sessions.
func (s *Server) Close() error { return s.smtp.Close() }

// Shutdown stops the listener, letting open sessions finish within ctx.
func (s *Server) Shutdown(ctx context.Context) error { return s.smtp.Shutdown(ctx) }

type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Printf(format string, v ...any) {
	a.l.Warn("inbound smtp", "error", fmt.Sprintf(format, v...))
}
func (a slogAdapter) Println(v ...any) { a.l.Warn("inbound smtp", "error", fmt.Sprint(v...)) }

type backend struct{ s *Server }

func (b backend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	ss := &session{s: b.s, conn: c, counted: connlimit.Of(c.Conn())}
	if tcp, ok := c.Conn().RemoteAddr().(*net.TCPAddr); ok {
		ss.ip = tcp.IP
	}
	return ss, nil
}

// rcpt is one accepted recipient: a bounce address (sendID), an
// unsubscribe address (unsubscribe, its token) or a receiving address
// (route).
type rcpt struct {
	addr        string
	sendID      string
	bound       int // the recipient index the bounce address is bound to; -1: none
	unsubscribe string
	route       *core.ReceivingAddress
}

type session struct {
	s       *Server
	conn    *smtp.Conn
	counted *connlimit.Conn // nil when served on a plain listener
	ip      net.IP
	from    string
	rcpts   []rcpt
}

func (ss *session) Reset() {
	ss.from, ss.rcpts = "", nil
	if ss.counted != nil {
		ss.counted.Transaction(false)
	}
}

func (ss *session) Logout() error { return nil }

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	ss.from = from // reports come from <>; anything is taken
	if ss.counted != nil {
		ss.counted.Transaction(true)
	}
	return nil
}

var (
	errNoSuchUser = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such recipient here"}
	errTryLater   = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "could not store the message; try again later"}
	errFull       = &smtp.SMTPError{Code: 452, EnhancedCode: smtp.EnhancedCode{4, 2, 2}, Message: "the recipient's storage is full; try again later"}
	errDMARC      = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "the message fails the sender domain's DMARC policy"}
	errHeader     = &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 3, 4}, Message: "the message header has more than 1,000 fields or 1 MiB"}
	errBusy       = &smtp.SMTPError{Code: 452, EnhancedCode: smtp.EnhancedCode{4, 3, 1}, Message: "too much mail in progress; try again later"}
)

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if ss.s.cfg.Signer != nil {
		if id, bound, err := ss.s.cfg.Signer.Parse(to); err == nil {
			ss.rcpts = append(ss.rcpts, rcpt{addr: to, sendID: id, bound: bound})
			return nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if token, ok := ss.s.unsubscribeToken(to); ok {
		return ss.unsubscribeRcpt(ctx, to, token)
	}
	if ss.s.cfg.Receiver == nil {
		return errNoSuchUser
	}
	route, err := ss.s.cfg.Receiver.ReceivingRoute(ctx, to)
	if err := ss.lookupRefusal(ctx, "inbound route lookup", err); err != nil {
		return err
	}
	ss.rcpts = append(ss.rcpts, rcpt{addr: to, route: route})
	return nil
}

// lookupRefusal answers a RCPT whose lookup (what) failed: 550 for an
// address that is not there, 451 for anything else (logged, so the
// sender tries again); nil when it did not fail.
func (ss *session) lookupRefusal(ctx context.Context, what string, err error) error {
	if errors.Is(err, core.ErrNotFound) {
		return errNoSuchUser
	}
	if err != nil {
		ss.s.cfg.Logger.ErrorContext(ctx, what, slog.Any("error", err))
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
	}
	return nil
}

// Data reads the message within the listener's memory budget (452 4.3.1
// when the budget is spent; go-smtp answers 552 past MaxMessageBytes),
// refuses a header block (the message's or a part's) past inmail's
// bounds (552 5.3.4) before any parser sees it, then stores it before answering: once per bounce address's
// send, and once per receiving mailbox. Only a storage failure is a 4xx,
// so the sender keeps the message and tries again; what was stored
// before the failure is recognised as the same message then.
func (ss *session) Data(r io.Reader) error {
	if ss.counted != nil {
		ss.counted.Delivered()
	}
	raw, release, err := ss.s.memory.readAll(r, ss.s.cfg.MaxBytes)
	defer release()
	if errors.Is(err, errBudget) {
		ss.s.cfg.Logger.Warn("inbound memory budget spent", slog.Int64("max_memory", ss.s.cfg.MaxMemory))
		return errBusy
	}
	if err != nil {
		return err
	}
	if err := inmail.CheckHeaders(raw); err != nil {
		return errHeader
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ss.reports(ctx, raw); err != nil {
		return err
	}
	if err := ss.unsubscribes(ctx); err != nil {
		return err
	}
	ids, err := ss.receive(ctx, raw)
	if err != nil {
		return err
	}
	return receivedReply(ids)
}

func (ss *session) reports(ctx context.Context, raw []byte) error {
	done := map[string]bool{}
	for _, rc := range ss.rcpts {
		if rc.sendID == "" || done[rc.sendID] {
			continue // one copy per send, however many of its addresses
		}
		done[rc.sendID] = true
		res, err := ss.s.cfg.Receiver.RecordBounceReport(ctx, app.BounceReport{SendID: rc.sendID, Bound: rc.bound, MailFrom: ss.from, RcptTo: rc.addr, Raw: raw})
		if err != nil {
			ss.s.cfg.Logger.ErrorContext(ctx, "inbound report not recorded", slog.String("send_id", rc.sendID), slog.Any("error", err))
			return errTryLater
		}
		ss.s.cfg.Logger.InfoContext(ctx, "inbound mail", slog.String("send_id", rc.sendID), slog.String("result", string(res)))
	}
	return nil
}
