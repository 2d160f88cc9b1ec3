package inbound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/verp"
)

// DefaultMaxBytes bounds one inbound message: a DSN returning a whole
// message with attachments fits; anything larger is refused with 552.
const DefaultMaxBytes = 10 << 20

// maxRecipients bounds RCPT TO per message: a report goes to one bounce
// address.
const maxRecipients = 10

// Config is the listener's settings.
type Config struct {
	Signer   *verp.Signer
	Store    core.Transactor
	Logger   *slog.Logger
	MaxBytes int64            // default DefaultMaxBytes
	Now      func() time.Time // default time.Now
}

// Server is the SMTP listener of --inbound-addr.
type Server struct {
	cfg  Config
	smtp *smtp.Server
}

// New returns a listener; Serve starts it.
func New(cfg Config) *Server {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg}
	srv := smtp.NewServer(backend{s})
	srv.Domain = cfg.Signer.Domain()
	srv.MaxMessageBytes = cfg.MaxBytes
	srv.MaxRecipients = maxRecipients
	srv.ReadTimeout, srv.WriteTimeout = 2*time.Minute, 2*time.Minute
	srv.EnableSMTPUTF8 = true
	srv.ErrorLog = slogAdapter{cfg.Logger}
	s.smtp = srv
	return s
}

// Serve accepts connections on l until Close.
func (s *Server) Serve(l net.Listener) error {
	err := s.smtp.Serve(l)
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

func (b backend) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{s: b.s}, nil }

type rcpt struct{ addr, sendID string }

type session struct {
	s     *Server
	from  string
	rcpts []rcpt
}

func (ss *session) Reset()        { ss.from, ss.rcpts = "", nil }
func (ss *session) Logout() error { return nil }

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	ss.from = from // reports come from <>; anything is taken
	return nil
}

var errBadToken = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such bounce address"}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	id, err := ss.s.cfg.Signer.SendID(to)
	if err != nil {
		return errBadToken
	}
	ss.rcpts = append(ss.rcpts, rcpt{addr: to, sendID: id})
	return nil
}

var errTryLater = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "could not record the report; try again later"}

// Data reads the message (go-smtp answers 552 past MaxMessageBytes) and
// records it for each bounce address. It answers 250 for a report and for
// mail it keeps unmatched alike; only a database failure is a 451, so the
// sender keeps the report and tries again.
func (ss *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, rc := range ss.rcpts {
		res, err := Record(ctx, ss.s.cfg.Store, Mail{SendID: rc.sendID, MailFrom: ss.from, RcptTo: rc.addr, Raw: raw}, ss.s.cfg.Now().UTC())
		if err != nil {
			ss.s.cfg.Logger.ErrorContext(ctx, "inbound report not recorded", slog.String("send_id", rc.sendID), slog.Any("error", err))
			return errTryLater
		}
		ss.s.cfg.Logger.InfoContext(ctx, "inbound mail", slog.String("send_id", rc.sendID), slog.String("result", string(res)))
	}
	return nil
}
