package imapsync

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/sendonce/sendonce/internal/imapurl"
	"github.com/sendonce/sendonce/internal/outbound"
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
}

// Dial connects to cfg's server and logs in. The returned client is
// closed when ctx ends. handler receives the server's unilateral data.
func Dial(ctx context.Context, cfg imapurl.Config, o DialOptions, handler *imapclient.UnilateralDataHandler) (*imapclient.Client, error) {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.DialContext == nil {
		o.DialContext = (&net.Dialer{}).DialContext
	}
	dctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	conn, err := o.DialContext(dctx, "tcp", cfg.Addr())
	if err != nil {
		if errors.Is(err, outbound.ErrBlocked) {
			return nil, classed(ClassBlocked, err)
		}
		return nil, classed(ClassConnect, err)
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
	opts := &imapclient.Options{TLSConfig: tc, UnilateralDataHandler: handler}
	var c *imapclient.Client
	switch cfg.TLS {
	case imapurl.TLSImplicit:
		tconn := tls.Client(conn, tc)
		if err := tconn.HandshakeContext(dctx); err != nil {
			conn.Close()
			return nil, classed(ClassTLS, err)
		}
		c = imapclient.New(tconn, opts)
	case imapurl.TLSStartTLS:
		c, err = imapclient.NewStartTLS(conn, opts)
		if err != nil {
			return nil, classed(ClassTLS, err)
		}
	default:
		c = imapclient.New(conn, opts)
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	if err := c.WaitGreeting(); err != nil {
		stop()
		c.Close()
		return nil, classed(ClassConnection, err)
	}
	if err := c.Login(cfg.User, cfg.Password).Wait(); err != nil {
		stop()
		c.Close()
		var ie *imap.Error
		if errors.As(err, &ie) {
			return nil, classed(ClassLogin, errors.New("the server refused the login"))
		}
		return nil, classed(ClassConnection, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return c, nil
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
	boxes, err := c.List("", "*", opts).Collect()
	if err != nil {
		return "", classed(ClassProtocol, fmt.Errorf("list folders: %w", err))
	}
	for _, b := range boxes {
		if slices.Contains(b.Attrs, imap.MailboxAttrSent) {
			return b.Mailbox, nil
		}
	}
	for _, b := range boxes {
		if strings.EqualFold(b.Mailbox, "Sent") {
			return b.Mailbox, nil
		}
	}
	return "Sent", nil
}

// Describe says why a session failed in words fit for a tenant: the class
// and, for a connection that did not reach a server, refused, timed out
// and the like (outbound.Describe) — never the server's text, which could
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
		return "IMAP: " + outbound.FailBlocked
	case ClassConnect:
		return "IMAP: " + outbound.Describe(e.Err)
	case ClassTLS:
		return "IMAP: " + outbound.FailTLS
	case ClassFolder:
		return "IMAP: the inbox folder cannot be selected"
	}
	return "IMAP: the session failed"
}
