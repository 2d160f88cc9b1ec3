package transport

import (
	"context"
	"fmt"
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
	ss, stop, err := a.session(ctx)
	if err != nil {
		return err
	}
	defer func() {
		stop()
		ss.raw.Close()
	}()
	a.stage = StageQuit
	ss.c.CommandTimeout = min(cfg.CommandTimeout, quitTimeout)
	if err := ss.c.Quit(); err != nil {
		return a.fail(ctx, err)
	}
	return nil
}
