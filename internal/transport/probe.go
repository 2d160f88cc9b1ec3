package transport

import (
	"context"
	"fmt"
	"net"

	"github.com/emersion/go-smtp"
)

// Probe checks that a relay takes this configuration's login right now: it
// connects, reads the greeting, says EHLO, establishes TLS as configured,
// authenticates when a username is set, and quits. It sends nothing. The
// error is an *Error like Deliver's (its Stage says how far it got) and
// never contains the password.
func Probe(ctx context.Context, cfg SMTPConfig) error {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return &Error{Class: Temporary, Stage: StageDial, Err: fmt.Errorf("invalid transport configuration: %w", err)}
	}
	a := &attempt{cfg: &cfg, stage: StageDial}
	dialer := net.Dialer{Timeout: cfg.DialTimeout}
	rawConn, err := dialer.DialContext(ctx, "tcp", net.JoinHostPort(cfg.Host, cfg.Port))
	if err != nil {
		return a.fail(ctx, err)
	}
	defer rawConn.Close()
	stop := context.AfterFunc(ctx, func() { rawConn.Close() })
	defer stop()

	conn, err := a.open(ctx, rawConn)
	if err != nil {
		return a.fail(ctx, err)
	}
	c := smtp.NewClient(conn.client)
	a.client = c
	c.CommandTimeout = cfg.CommandTimeout
	a.stage = StageEHLO
	if err := c.Hello(cfg.HELOName); err != nil {
		return a.fail(ctx, err)
	}
	if cfg.Username != "" {
		a.stage = StageAuth
		if err := a.auth(c, conn.secure); err != nil {
			return a.fail(ctx, err)
		}
	}
	a.stage = StageQuit
	c.CommandTimeout = min(cfg.CommandTimeout, quitTimeout)
	if err := c.Quit(); err != nil {
		return a.fail(ctx, err)
	}
	return nil
}
