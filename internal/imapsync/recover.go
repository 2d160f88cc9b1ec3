package imapsync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/sendonce/sendonce/internal/core"
)

// A panic while syncing one mailbox (go-imap's helpers panic on some
// server data; so could ours) must not end the process and every other
// tenant's mail with it: each mailbox's session, each append, and each
// mailbox's goroutine as a last resort, recover, log the stack, and the
// session's failure pauses that mailbox alone.

// errPanicked is wrapped by the failure a recovered panic becomes.
var errPanicked = errors.New("the IMAP session stopped on an unexpected answer")

// safeSession is session with a panic turned into a protocol failure.
func (m *mailboxSync) safeSession(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			m.s.logger.Error("imap sync: recovered from a panic", slog.String("tenant", m.mb.Tenant),
				slog.String("mailbox_id", m.mb.ID), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			err = classed(ClassProtocol, fmt.Errorf("%w: %v", errPanicked, p))
		}
	}()
	return m.session(ctx)
}

// recovered ends a mailbox's goroutine quietly after a panic outside a
// session (the next rescan starts it again).
func (s *Syncer) recovered(mb *core.Mailbox) {
	if p := recover(); p != nil {
		s.logger.Error("imap sync: recovered from a panic", slog.String("tenant", mb.Tenant),
			slog.String("mailbox_id", mb.ID), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
	}
}

// safeAppend is appendOnce with a panic turned into a protocol failure.
func (a *Appender) safeAppend(ctx context.Context, job core.IMAPAppend) (err error) {
	defer func() {
		if p := recover(); p != nil {
			a.logger.Error("imap append: recovered from a panic", slog.String("send_id", job.SendID),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			err = classed(ClassProtocol, fmt.Errorf("%w: %v", errPanicked, p))
		}
	}()
	return a.appendOnce(ctx, job)
}
