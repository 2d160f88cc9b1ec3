package imapsync

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/defaults"
	"github.com/sendonce/sendonce/internal/imapurl"
	"github.com/sendonce/sendonce/internal/netpolicy"
)

// The classes a failure is told in: the mailbox's paused status and the
// status route say these, never what the server wrote.
const (
	ClassLogin      = "login_failed"   // the server refused the user name or password
	ClassConnect    = "connect_failed" // no TCP connection (refused, timed out, no route)
	ClassBlocked    = "blocked"        // the outbound policy forbids the address
	ClassTLS        = "tls_failed"     // the TLS handshake or certificate failed
	ClassFolder     = "folder_missing" // the inbox folder cannot be selected
	ClassConnection = "connection_lost"
	ClassProtocol   = "protocol_error"
)

// Error is a failure of a session with its class.
type Error struct {
	Class string
	Err   error
}

func (e *Error) Error() string { return "imap " + e.Class + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ClassOf is the class of err (ClassProtocol for an unclassified one).
func ClassOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return ClassProtocol
}

func classed(class string, err error) error { return &Error{Class: class, Err: err} }

// DialOptions says how to reach servers.
type DialOptions struct {
	// DialContext dials (the outbound policy's, for tenants' servers).
	// Defaults to a net.Dialer's.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS is the base TLS configuration (tests trust their CA with it).
	TLS *tls.Config
	// Timeout bounds connecting and logging in. Defaults to 30 s.
	Timeout time.Duration
	// MaxLineBytes bounds a response line outside literals. Defaults to
	// DefaultMaxLineBytes.
	MaxLineBytes int64
	// MaxLiteralBytes bounds a literal (a message body is one). Defaults
	// to app.DefaultMaxMessageBytes and a little more.
	MaxLiteralBytes int64
}

func (o *DialOptions) defaults() {
	defaults.Set(&o.Timeout, 30*time.Second)
	if o.DialContext == nil {
		o.DialContext = (&net.Dialer{}).DialContext
	}
	defaults.Set(&o.MaxLineBytes, DefaultMaxLineBytes)
	defaults.Set(&o.MaxLiteralBytes, app.DefaultMaxMessageBytes+literalSlack)
}

// Dial connects to cfg's server and logs in. The returned client is
// closed when ctx ends. handler receives the server's unilateral data.
func Dial(ctx context.Context, cfg imapurl.Config, o DialOptions, handler *imapclient.UnilateralDataHandler) (*imapclient.Client, error) {
	c, _, err := dial(ctx, cfg, o, handler)
	return c, err
}

// dial is Dial that also returns the guard under the client: its Err says
// when a session ended because the server overstepped a bound, and its
// deadlines bound a pass.
func dial(ctx context.Context, cfg imapurl.Config, o DialOptions, handler *imapclient.UnilateralDataHandler) (*imapclient.Client, *guardConn, error) {
	o.defaults()
	dctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	conn, err := o.DialContext(dctx, "tcp", cfg.Addr())
	if err != nil {
		if errors.Is(err, netpolicy.ErrBlocked) {
			return nil, nil, classed(ClassBlocked, err)
		}
		return nil, nil, classed(ClassConnect, err)
	}
	// Connecting and logging in have o.Timeout; the session then runs as
	// long as ctx.
	_ = conn.SetDeadline(time.Now().Add(o.Timeout))
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.TLS != nil {
		tc = o.TLS.Clone()
	}
	if tc.ServerName == "" {
		tc.ServerName = cfg.Host
	}
	// The guard reads the plain text: under TLS, and after a STARTTLS
	// done here rather than inside the client.
	var plain net.Conn = conn
	switch cfg.TLS {
	case imapurl.TLSImplicit:
		tconn := tls.Client(conn, tc)
		if err := tconn.HandshakeContext(dctx); err != nil {
			conn.Close()
			return nil, nil, classed(ClassTLS, err)
		}
		plain = tconn
	case imapurl.TLSStartTLS:
		tconn, err := startTLS(dctx, conn, tc)
		if err != nil {
			conn.Close()
			return nil, nil, err
		}
		plain = tconn
	}
	g := newGuard(plain, o.MaxLineBytes, o.MaxLiteralBytes)
	var client net.Conn = g
	if cfg.TLS == imapurl.TLSStartTLS {
		client = withGreeting(g)
	}
	c := imapclient.New(client, &imapclient.Options{TLSConfig: tc, UnilateralDataHandler: handler})
	stop := context.AfterFunc(ctx, func() { c.Close() })
	if err := c.WaitGreeting(); err != nil {
		stop()
		c.Close()
		return nil, nil, classed(ClassConnection, err)
	}
	if err := c.Login(cfg.User, cfg.Password).Wait(); err != nil {
		stop()
		c.Close()
		var ie *imap.Error
		if errors.As(err, &ie) {
			return nil, nil, classed(ClassLogin, errors.New("the server refused the login"))
		}
		return nil, nil, classed(ClassConnection, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return c, g, nil
}

// startTLS asks for TLS on a fresh connection and shakes hands: the
// greeting and the answer are read under a short line bound, and a server
// that sends anything past its OK before TLS (an injection) is refused.
func startTLS(ctx context.Context, conn net.Conn, tc *tls.Config) (net.Conn, error) {
	br := bufio.NewReader(newGuard(conn, 8<<10, 0))
	greeting, err := br.ReadString('\n')
	if err != nil {
		return nil, classed(ClassConnection, fmt.Errorf("greeting: %w", err))
	}
	if !strings.HasPrefix(greeting, "* OK") {
		// PREAUTH before TLS is refused too (RFC 9051 7.1.4).
		return nil, classed(ClassTLS, errors.New("the server did not greet with OK before STARTTLS"))
	}
	if _, err := io.WriteString(conn, "S1 STARTTLS\r\n"); err != nil {
		return nil, classed(ClassConnection, err)
	}
	for i := 0; ; i++ {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, classed(ClassConnection, fmt.Errorf("starttls: %w", err))
		}
		if strings.HasPrefix(line, "S1 ") {
			if !strings.HasPrefix(strings.ToUpper(line), "S1 OK") {
				return nil, classed(ClassTLS, errors.New("the server refused STARTTLS"))
			}
			break
		}
		if i == 100 {
			return nil, classed(ClassLimit, fmt.Errorf("%w: no answer to STARTTLS", errOverLimit))
		}
	}
	if br.Buffered() > 0 {
		return nil, classed(ClassTLS, errors.New("the server sent data before the TLS handshake"))
	}
	tconn := tls.Client(conn, tc)
	if err := tconn.HandshakeContext(ctx); err != nil {
		return nil, classed(ClassTLS, err)
	}
	return tconn, nil
}

// Probe logs in to cfg's server and out: the mailbox status check.
func Probe(ctx context.Context, cfg imapurl.Config, o DialOptions) error {
	c, err := Dial(ctx, cfg, o, nil)
	if err != nil {
		return err
	}
	_ = c.Logout().Wait()
	c.Close()
	return nil
}

// sentFolder finds the folder sends are filed in: the one configured,
// else the one marked \Sent (SPECIAL-USE), else "Sent".
func sentFolder(c *imapclient.Client, configured string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	var opts *imap.ListOptions
	if c.Caps().Has(imap.CapSpecialUse) {
		opts = &imap.ListOptions{ReturnSpecialUse: true}
	}
	// The folders are read one at a time and at most maxListed of them:
	// a server may list without end. Only what is needed is kept.
	cmd := c.List("", "*", opts)
	var byAttr, byName string
	for i := 0; ; i++ {
		b := cmd.Next()
		if b == nil {
			break
		}
		if i == maxListed {
			// cmd.Close would read the rest: end the connection instead,
			// taking what the client's reader still hands over meanwhile
			// (it waits on the command's channel, and Close on it).
			go func() {
				for cmd.Next() != nil {
				}
			}()
			c.Close()
			return "", classed(ClassLimit, fmt.Errorf("%w: more than %d folders", errOverLimit, maxListed))
		}
		if byAttr == "" && slices.Contains(b.Attrs, imap.MailboxAttrSent) {
			byAttr = b.Mailbox
		}
		if byName == "" && strings.EqualFold(b.Mailbox, "Sent") {
			byName = b.Mailbox
		}
	}
	if err := cmd.Close(); err != nil {
		return "", classed(ClassProtocol, fmt.Errorf("list folders: %w", err))
	}
	if byAttr != "" {
		return byAttr, nil
	}
	if byName != "" {
		return byName, nil
	}
	return "Sent", nil
}

// Describe says why a session failed in words fit for a tenant: the class
// and, for a connection that did not reach a server, refused, timed out
// and the like (netpolicy.Describe) — never the server's text, which could
// map the network around sendonce or leak its banner.
func Describe(err error) string {
	var e *Error
	if !errors.As(err, &e) {
		return "the IMAP server could not be checked"
	}
	switch e.Class {
	case ClassLogin:
		return "IMAP login failed"
	case ClassBlocked:
		return "IMAP: " + netpolicy.FailBlocked
	case ClassConnect:
		return "IMAP: " + netpolicy.Describe(e.Err)
	case ClassTLS:
		return "IMAP: " + netpolicy.FailTLS
	case ClassFolder:
		return "IMAP: the inbox folder cannot be selected"
	case ClassLimit:
		return "IMAP: the server sent more than the limits allow"
	}
	return "IMAP: the session failed"
}
