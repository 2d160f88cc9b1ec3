package mxserver

import (
	"log/slog"

	"github.com/sendonce/sendonce/internal/connlimit"
)

// refusal is the one line a refused connection gets, whatever the bound.
var refusal = []byte("421 4.7.0 Too many connections; try again later\r\n")

// limiter bounds the listener's connections (connlimit): MaxConns in all,
// ending the session idle the longest for a newcomer; MaxConnsPerIP per
// client; each for at most SessionTimeout and MaxIdleCommands commands
// outside a transaction since its last message.
func (s *Server) limiter() *connlimit.Limiter {
	return connlimit.New(connlimit.Config{
		Max: s.cfg.MaxConns, PerClient: s.cfg.MaxConnsPerIP,
		Session: s.cfg.SessionTimeout, MaxIdleCommands: s.cfg.MaxIdleCommands, Evict: true,
		Refusal: func(connlimit.Reason) []byte { return refusal },
		OnEvict: func(client string) {
			s.cfg.Logger.Info("inbound session ended for a newcomer", slog.String("client", client))
		},
	})
}
