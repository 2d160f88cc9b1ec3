package submission

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/connlimit"
	"github.com/sendonce/sendonce/internal/defaults"
	"github.com/sendonce/sendonce/internal/metrics"
)

// Defaults of Config.
const (
	DefaultMaxMessageBytes   = 10 << 20
	DefaultMaxSessions       = 200
	DefaultMaxSessionsPerKey = 20
	DefaultCommandTimeout    = time.Minute
	DefaultSessionTimeout    = 30 * time.Minute
	DefaultAuthTimeout       = 2 * time.Minute
	// DefaultMaxUnauthenticatedPerIP bounds one client address's
	// connections that have not authenticated yet: Postfix's
	// smtpd_client_connection_count_limit, so that an app's pool or a
	// relay's 20 parallel deliveries, which all connect before any has
	// authenticated, are served.
	DefaultMaxUnauthenticatedPerIP = 50
	DefaultAcceptTimeout           = 30 * time.Second
)

// Config is the SMTP server's settings. Zero values take the defaults.
type Config struct {
	// Domain is the name the greeting and EHLO say. Defaults to
	// "localhost".
	Domain string
	// MaxMessageBytes bounds a message (SIZE, 552 past it).
	MaxMessageBytes int64
	// TLS, when set, offers STARTTLS (and is the certificate of an
	// implicit-TLS listener). AUTH is offered over TLS, and without it
	// only to clients on loopback addresses.
	TLS *tls.Config
	// MaxSessions bounds the connections open at once; MaxSessionsPerKey
	// those one API key has authenticated.
	MaxSessions, MaxSessionsPerKey int
	// MaxUnauthenticatedPerIP bounds the connections of one client
	// address that have not authenticated (421 past it): one stranger
	// cannot hold every slot.
	MaxUnauthenticatedPerIP int
	// CommandTimeout bounds the wait for each command line and each
	// reply write; SessionTimeout a whole connection and AuthTimeout its
	// time to a successful AUTH, both from accept.
	CommandTimeout, SessionTimeout, AuthTimeout time.Duration
	// AcceptTimeout bounds the acceptance of one message (after the
	// final dot, before its reply).
	AcceptTimeout time.Duration
}

// Server accepts submitted messages as sends.
type Server struct {
	svc     *app.Service
	idem    *idempotency.Engine
	metrics *metrics.Metrics
	cfg     Config
	logger  *slog.Logger

	// limits counts the connections of all listeners (limit.go).
	limits  *connlimit.Limiter
	mu      sync.Mutex
	perKey  map[string]int
	servers []*smtp.Server
	closed  bool
}

// New returns a server that accepts messages through svc. m may be nil.
func New(svc *app.Service, m *metrics.Metrics, cfg Config, logger *slog.Logger) *Server {
	if cfg.Domain == "" {
		cfg.Domain = "localhost"
	}
	defaults.Set(&cfg.MaxMessageBytes, DefaultMaxMessageBytes)
	defaults.Set(&cfg.MaxSessions, DefaultMaxSessions)
	defaults.Set(&cfg.MaxSessionsPerKey, DefaultMaxSessionsPerKey)
	defaults.Set(&cfg.CommandTimeout, DefaultCommandTimeout)
	defaults.Set(&cfg.SessionTimeout, DefaultSessionTimeout)
	defaults.Set(&cfg.AuthTimeout, DefaultAuthTimeout)
	defaults.Set(&cfg.MaxUnauthenticatedPerIP, DefaultMaxUnauthenticatedPerIP)
	defaults.Set(&cfg.AcceptTimeout, DefaultAcceptTimeout)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{svc: svc, metrics: m, cfg: cfg, logger: logger, perKey: map[string]int{}}
	s.limits = s.newLimiter()
	s.idem = svc.Idempotency()
	return s
}

// Serve answers SMTP (with STARTTLS when configured) on ln until
// Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.serve(s.limit(ln)) }

// ServeTLS answers SMTP over implicit TLS (submissions, RFC 8314) on ln.
func (s *Server) ServeTLS(ln net.Listener) error {
	if s.cfg.TLS == nil {
		return errors.New("smtps: no TLS certificate configured")
	}
	return s.serve(tls.NewListener(s.limit(ln), s.cfg.TLS))
}

// limit bounds ln's open connections by MaxSessions, counted with those
// of the server's other listeners.
func (s *Server) limit(ln net.Listener) net.Listener {
	return s.limits.Listen(ln)
}

func (s *Server) serve(ln net.Listener) error {
	srv := smtp.NewServer(s)
	srv.Domain = s.cfg.Domain
	srv.MaxMessageBytes = s.cfg.MaxMessageBytes
	srv.MaxRecipients = app.MaxRecipients // one limit for both APIs: 452 past it
	srv.ReadTimeout, srv.WriteTimeout = s.cfg.CommandTimeout, s.cfg.CommandTimeout
	srv.TLSConfig = s.cfg.TLS
	srv.EnableSMTPUTF8 = true
	// go-smtp's own check would refuse AUTH without TLS everywhere; the
	// session applies the contract's rule (TLS, or a loopback client).
	srv.AllowInsecureAuth = true
	srv.ErrorLog = slogLogger{s.logger}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return smtp.ErrServerClosed
	}
	s.servers = append(s.servers, srv)
	s.mu.Unlock()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, smtp.ErrServerClosed) {
		return fmt.Errorf("smtp: %w", err)
	}
	return nil
}

// Shutdown stops accepting connections and waits, bounded by ctx, for the
// open sessions to end.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	srvs := s.servers
	s.mu.Unlock()
	var errs []error
	for _, srv := range srvs {
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, smtp.ErrServerClosed) {
			errs = append(errs, err)
			_ = srv.Close()
		}
	}
	return errors.Join(errs...)
}

// NewSession implements smtp.Backend: it is called at the first EHLO (and
// again after STARTTLS). The listener bounds how many there are.
func (s *Server) NewSession(c *smtp.Conn) (smtp.Session, error) {
	if s.metrics != nil {
		s.metrics.SMTPSessions.Inc()
		s.metrics.SMTPSessionsOpen.Inc()
	}
	// A whole connection is bounded from accept, whatever its commands
	// do (the listener's deadlines).
	return &session{s: s, conn: c, loopback: isLoopback(c.Conn().RemoteAddr())}, nil
}

// enterKey counts a session of key; false when it has MaxSessionsPerKey.
func (s *Server) enterKey(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perKey[id] >= s.cfg.MaxSessionsPerKey {
		return false
	}
	s.perKey[id]++
	return true
}

func (s *Server) leaveKey(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perKey[id]--; s.perKey[id] <= 0 {
		delete(s.perKey, id)
	}
}

func (s *Server) reject(code int) {
	if s.metrics != nil {
		s.metrics.SMTPRejections.WithLabelValues(fmt.Sprint(code)).Inc()
	}
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// slogLogger is go-smtp's error log on slog.
type slogLogger struct{ l *slog.Logger }

func (l slogLogger) Printf(format string, v ...any) {
	l.l.Warn("smtp", slog.String("error", fmt.Sprintf(format, v...)))
}
func (l slogLogger) Println(v ...any) { l.l.Warn("smtp", slog.String("error", fmt.Sprint(v...))) }
