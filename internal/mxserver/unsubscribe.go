package mxserver

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// Mail to the unsubscribe headers' mailto: form does what POST /u/{token}
// does (docs/deliverability.md, "One-click unsubscribe"): whatever the
// message says, its arrival is the request. A second copy (a sender's
// retry after a lost 250) changes nothing: the use case records each
// recipient's unsubscribe once.

// unsubscribeToken returns the token of an unsubscribe address of this
// listener's domain (case does not matter), and false for any other.
func (s *Server) unsubscribeToken(addr string) (string, bool) {
	if s.cfg.Unsubscriber == nil || s.cfg.UnsubscribeDomain == "" {
		return "", false
	}
	local, domain, ok := strings.Cut(strings.ToLower(strings.TrimSpace(addr)), "@")
	if !ok || domain != strings.ToLower(s.cfg.UnsubscribeDomain) {
		return "", false
	}
	token, ok := strings.CutPrefix(local, app.UnsubscribeLocalPrefix)
	return token, ok && token != ""
}

// unsubscribeRcpt accepts an unsubscribe address whose token names a
// recipient of a send that exists: 550 for one altered or unknown.
func (ss *session) unsubscribeRcpt(ctx context.Context, to, token string) error {
	err := ss.s.cfg.Unsubscriber.CheckUnsubscribe(ctx, token)
	if err := ss.lookupRefusal(ctx, "inbound unsubscribe check", err); err != nil {
		return err
	}
	ss.rcpts = append(ss.rcpts, rcpt{addr: to, unsubscribe: token})
	return nil
}

// unsubscribes records the unsubscribe of each unsubscribe address among
// the recipients before the message is answered: a failure is a 451, and
// the sender's retry finds what was recorded already.
func (ss *session) unsubscribes(ctx context.Context) error {
	for _, rc := range ss.rcpts {
		if rc.unsubscribe == "" {
			continue
		}
		created, err := ss.s.cfg.Unsubscriber.Unsubscribe(ctx, rc.unsubscribe, app.UnsubscribeViaMail)
		if errors.Is(err, core.ErrNotFound) {
			continue // the send was purged since RCPT: nothing left to record
		}
		if err != nil {
			ss.s.cfg.Logger.ErrorContext(ctx, "inbound unsubscribe not recorded", slog.Any("error", err))
			return errTryLater
		}
		ss.s.cfg.Logger.InfoContext(ctx, "inbound unsubscribe", slog.Bool("first", created))
	}
	return nil
}
