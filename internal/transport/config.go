package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// TLSMode says how the SMTP transport protects the connection.
type TLSMode string

const (
	// TLSOpportunistic (the empty mode) uses STARTTLS when the server offers
	// it and continues in plain text otherwise. Credentials are never sent
	// over the plain-text fallback, and a failed handshake (an untrusted
	// certificate, say) fails the attempt rather than falling back: the
	// certificate is always verified.
	TLSOpportunistic TLSMode = ""
	// TLSNone never starts TLS, and is the only mode that allows AUTH in
	// plain text.
	TLSNone TLSMode = "none"
	// TLSStartTLS requires STARTTLS; a server that does not offer it fails
	// the attempt rather than being used unencrypted.
	TLSStartTLS TLSMode = "starttls"
	// TLSImplicit speaks TLS from the first byte (SMTPS, usually port 465).
	TLSImplicit TLSMode = "tls"
)

func (m TLSMode) valid() bool {
	switch m {
	case TLSOpportunistic, TLSNone, TLSStartTLS, TLSImplicit:
		return true
	}
	return false
}

// Defaults applied by NewSMTP to zero fields of SMTPConfig.
const (
	DefaultHELOName       = "localhost"
	DefaultDialTimeout    = 30 * time.Second
	DefaultCommandTimeout = 5 * time.Minute  // RFC 5321 section 4.5.3.2
	DefaultDataTimeout    = 10 * time.Minute // RFC 5321's 10 min for the final reply
)

// SMTPConfig configures the relay transport.
type SMTPConfig struct {
	Host string
	Port string // defaults to 25, or 465 when TLS is TLSImplicit

	// Username enables AUTH (PLAIN if offered, else LOGIN). AUTH is never
	// done over an unencrypted connection unless TLS is TLSNone.
	Username, Password string

	TLS TLSMode
	// TLSConfig is optional; it is cloned, and ServerName defaults to Host.
	TLSConfig *tls.Config

	// DialContext opens the TCP connection to Host:Port. Defaults to a
	// net.Dialer with DialTimeout. Relays a tenant configured through the
	// API dial through an netpolicy.Policy here; the operator's --transport
	// is trusted and dials directly.
	DialContext func(ctx context.Context, network, address string) (net.Conn, error)

	HELOName       string        // defaults to "localhost"
	DialTimeout    time.Duration // TCP connect and implicit TLS handshake
	CommandTimeout time.Duration // each command and its reply
	DataTimeout    time.Duration // the whole body plus the final reply

	// MaxIdle is how many sessions are kept open between messages and
	// reused (after an RSET that proves them alive). 0 closes every session
	// after its message, as a one-shot client should.
	MaxIdle int
	// MaxSessions bounds the sessions open to the relay at once; a Deliver
	// beyond it waits for one to finish. 0 means no bound.
	MaxSessions int
	// IdleTimeout closes a session that waited this long for its next
	// message; relays drop idle clients after a minute or so. Defaults to
	// 30s.
	IdleTimeout time.Duration
	// MaxSessionAge closes a session this old instead of reusing it again.
	// Defaults to 5 minutes.
	MaxSessionAge time.Duration
}

// MaxSessionsLimit is the largest max_sessions an SMTP URL may ask for.
const MaxSessionsLimit = 1000

// ParseSMTPURL parses
// smtp://[user:pass@]host[:port][?tls=none|starttls|tls][&max_sessions=N]
// or smtps://… (meaning tls=tls). User and password are URL-decoded. The port
// defaults to 25, or 465 with implicit TLS. Errors never quote the password.
func ParseSMTPURL(s string) (SMTPConfig, error) {
	var cfg SMTPConfig
	u, err := url.Parse(s)
	if err != nil {
		// url.Error quotes the input, password included; only pass the
		// detail on when there is no userinfo it could come from.
		if ue := (*url.Error)(nil); !strings.Contains(s, "@") && errors.As(err, &ue) {
			return cfg, fmt.Errorf("transport: invalid SMTP URL: %w", ue.Err)
		}
		return cfg, errors.New("transport: invalid SMTP URL (check that user and password are URL-encoded)")
	}
	switch strings.ToLower(u.Scheme) {
	case "smtp":
	case "smtps":
		cfg.TLS = TLSImplicit
	default:
		return cfg, fmt.Errorf("transport: invalid SMTP URL: unsupported scheme %q (want smtp or smtps)", u.Scheme)
	}
	if u.Opaque != "" {
		return cfg, errors.New("transport: invalid SMTP URL: want scheme://host:port")
	}
	if u.Path != "" && u.Path != "/" {
		return cfg, errors.New("transport: invalid SMTP URL: unexpected path")
	}
	if u.Fragment != "" {
		return cfg, errors.New("transport: invalid SMTP URL: unexpected fragment")
	}
	cfg.Host = u.Hostname()
	if cfg.Host == "" {
		return cfg, errors.New("transport: invalid SMTP URL: missing host")
	}

	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return cfg, fmt.Errorf("transport: invalid SMTP URL query: %w", err)
	}
	for key, vals := range q {
		if len(vals) != 1 {
			return cfg, fmt.Errorf("transport: invalid SMTP URL: %s given more than once", key)
		}
		if key == "max_sessions" {
			n, err := strconv.Atoi(vals[0])
			if err != nil || n < 1 || n > MaxSessionsLimit {
				return cfg, fmt.Errorf("transport: invalid SMTP URL: max_sessions must be 1 to %d", MaxSessionsLimit)
			}
			cfg.MaxSessions = n
			continue
		}
		// Unknown parameters are refused because a typo such as "tsl=tls"
		// would otherwise silently weaken security.
		if key != "tls" {
			return cfg, fmt.Errorf("transport: invalid SMTP URL: unknown parameter %q", key)
		}
		mode := TLSMode(strings.ToLower(vals[0]))
		if mode == TLSOpportunistic || !mode.valid() {
			return cfg, fmt.Errorf("transport: invalid SMTP URL: unknown tls mode %q (want none, starttls or tls)", vals[0])
		}
		if cfg.TLS == TLSImplicit && mode != TLSImplicit {
			return cfg, fmt.Errorf("transport: invalid SMTP URL: smtps:// conflicts with tls=%s", mode)
		}
		cfg.TLS = mode
	}

	cfg.Port = u.Port()
	if cfg.Port == "" {
		cfg.Port = defaultPort(cfg.TLS)
	} else if n, err := strconv.Atoi(cfg.Port); err != nil || n < 1 || n > 65535 {
		return cfg, fmt.Errorf("transport: invalid SMTP URL: invalid port %q", cfg.Port)
	}

	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
		if cfg.Username == "" && cfg.Password != "" {
			return cfg, errors.New("transport: invalid SMTP URL: password without user name")
		}
	}
	return cfg, nil
}

func defaultPort(m TLSMode) string {
	if m == TLSImplicit {
		return "465"
	}
	return "25"
}

// Redacted returns the configuration as an smtp:// URL with the password
// replaced by "xxxxx", fit for logs and API responses.
func (c SMTPConfig) Redacted() string {
	u := url.URL{Scheme: "smtp", Host: net.JoinHostPort(c.Host, c.port())}
	if c.Username != "" {
		if c.Password != "" {
			u.User = url.UserPassword(c.Username, "xxxxx")
		} else {
			u.User = url.User(c.Username)
		}
	}
	if c.TLS != TLSOpportunistic {
		u.RawQuery = url.Values{"tls": {string(c.TLS)}}.Encode()
	}
	return u.String()
}

func (c SMTPConfig) port() string {
	if c.Port != "" {
		return c.Port
	}
	return defaultPort(c.TLS)
}

// validate reports configuration mistakes; they are the operator's, not the
// message's, so Deliver reports them as Temporary.
func (c SMTPConfig) validate() error {
	if c.Host == "" {
		return errors.New("SMTP host not configured")
	}
	if !c.TLS.valid() {
		return fmt.Errorf("unknown TLS mode %q", string(c.TLS))
	}
	if strings.ContainsAny(c.HELOName, "\r\n ") {
		return errors.New("invalid HELO name")
	}
	return nil
}

// withDefaults fills zero fields.
func (c SMTPConfig) withDefaults() SMTPConfig {
	c.Port = c.port()
	sessionDefaults(&c.HELOName, &c.DialTimeout, &c.CommandTimeout, &c.DataTimeout)
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 30 * time.Second
	}
	if c.MaxSessionAge <= 0 {
		c.MaxSessionAge = 5 * time.Minute
	}
	return c
}

// sessionDefaults fills the session settings SMTPConfig and MXConfig
// share, each left empty (or not positive, for a timeout), with the same
// defaults: a relay and an exchanger are spoken to alike.
func sessionDefaults(helo *string, dial, command, data *time.Duration) {
	if *helo == "" {
		*helo = DefaultHELOName
	}
	if *dial <= 0 {
		*dial = DefaultDialTimeout
	}
	if *command <= 0 {
		*command = DefaultCommandTimeout
	}
	if *data <= 0 {
		*data = DefaultDataTimeout
	}
}

// tlsConfig returns a private copy, so one Deliver cannot affect another.
func (c SMTPConfig) tlsConfig() *tls.Config {
	tc := &tls.Config{}
	if c.TLSConfig != nil {
		tc = c.TLSConfig.Clone()
	}
	if tc.ServerName == "" {
		tc.ServerName = c.Host
	}
	if tc.MinVersion == 0 {
		tc.MinVersion = tls.VersionTLS12
	}
	return tc
}

// dial opens the TCP connection, within DialTimeout.
func (c SMTPConfig) dial(ctx context.Context) (net.Conn, error) {
	addr := net.JoinHostPort(c.Host, c.Port)
	if c.DialContext == nil {
		d := net.Dialer{Timeout: c.DialTimeout}
		return d.DialContext(ctx, "tcp", addr)
	}
	dctx, cancel := context.WithTimeout(ctx, c.DialTimeout)
	defer cancel()
	return c.DialContext(dctx, "tcp", addr)
}
