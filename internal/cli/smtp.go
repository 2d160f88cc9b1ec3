package cli

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/sendonce/sendonce/internal/certs"
	"github.com/sendonce/sendonce/internal/submission"
)

// smtpConfig is the SMTP submission server's settings (docs/smtp.md).
type smtpConfig struct {
	Addr, TLSAddr    string
	TLSCert, TLSKey  string
	MaxSessions      int
	MaxSessionsOfKey int
	MaxUnauthPerIP   int
}

func smtpFlags(e *envFlags, c *smtpConfig) {
	e.str(&c.Addr, "smtp-addr", "SENDONCE_SMTP_ADDR", "", "SMTP submission listen address, e.g. 127.0.0.1:587 (off by default; roles api and all)")
	e.str(&c.TLSAddr, "smtps-addr", "SENDONCE_SMTPS_ADDR", "", "SMTP submission over implicit TLS (port 465 style) listen address; needs --smtp-tls-cert (off by default)")
	e.str(&c.TLSCert, "smtp-tls-cert", "SENDONCE_SMTP_TLS_CERT", "", "PEM certificate (chain) for STARTTLS and --smtps-addr; without it AUTH is offered only to loopback clients")
	e.str(&c.TLSKey, "smtp-tls-key", "SENDONCE_SMTP_TLS_KEY", "", "PEM private key of --smtp-tls-cert")
	e.integer(&c.MaxSessions, "smtp-max-sessions", "SENDONCE_SMTP_MAX_SESSIONS", submission.DefaultMaxSessions, "SMTP sessions open at once; past it a client gets 421")
	e.integer(&c.MaxUnauthPerIP, "smtp-max-unauthenticated-per-ip", "SENDONCE_SMTP_MAX_UNAUTHENTICATED_PER_IP", submission.DefaultMaxUnauthenticatedPerIP, "SMTP connections one client address may have open before they authenticate; past it a new one gets 421")
	e.integer(&c.MaxSessionsOfKey, "smtp-max-sessions-per-key", "SENDONCE_SMTP_MAX_SESSIONS_PER_KEY", submission.DefaultMaxSessionsPerKey, "SMTP sessions one API key may have authenticated at once; past it AUTH gets 454")
}

func (c *smtpConfig) validate() error {
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("--smtp-tls-cert and --smtp-tls-key go together")
	}
	if c.TLSAddr != "" && c.TLSCert == "" {
		return fmt.Errorf("--smtps-addr needs --smtp-tls-cert and --smtp-tls-key")
	}
	if c.MaxSessions < 1 || c.MaxSessionsOfKey < 1 || c.MaxUnauthPerIP < 1 {
		return fmt.Errorf("--smtp-max-sessions, --smtp-max-sessions-per-key and --smtp-max-unauthenticated-per-ip must be at least 1")
	}
	return nil
}

// submissionConfig is the server's view of the settings; it loads the
// certificate, which STARTTLS and --smtps-addr serve from the pair
// returned (nil without one) until SIGHUP reloads it.
func (c *smtpConfig) submissionConfig() (submission.Config, *certs.Pair, error) {
	sc := submission.Config{MaxSessions: c.MaxSessions, MaxSessionsPerKey: c.MaxSessionsOfKey, MaxUnauthenticatedPerIP: c.MaxUnauthPerIP}
	if c.TLSCert == "" {
		return sc, nil, nil
	}
	pair, err := certs.Load("smtp", c.TLSCert, c.TLSKey)
	if err != nil {
		return sc, nil, fmt.Errorf("--smtp-tls-cert: %w", err)
	}
	sc.TLS = pair.ServerConfig()
	return sc, pair, nil
}

// startSMTP listens on the configured SMTP addresses and serves them; a
// serving error is sent to errs.
func startSMTP(c *smtpConfig, sub *submission.Server, logger *slog.Logger, errs chan<- error) error {
	for _, l := range []struct {
		addr  string
		tls   bool
		serve func(net.Listener) error
	}{{c.Addr, false, sub.Serve}, {c.TLSAddr, true, sub.ServeTLS}} {
		if l.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			return fmt.Errorf("smtp listen: %w", err)
		}
		logger.Info("smtp listening", slog.String("addr", ln.Addr().String()), slog.Bool("implicit_tls", l.tls),
			slog.Bool("starttls", c.TLSCert != ""))
		serve := l.serve
		go func() {
			if err := serve(ln); err != nil {
				errs <- err
			}
		}()
	}
	return nil
}
