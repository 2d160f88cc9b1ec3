package submission

import (
	"fmt"

	"github.com/sendonce/sendonce/internal/connlimit"
)

// The two refusals say which limit the client met.
var (
	tooManyReply      = []byte("421 4.7.0 too many SMTP sessions open on this server (--smtp-max-sessions); try again later\r\n")
	tooManyFromClient = "421 4.7.0 too many connections from your address that have not authenticated yet (limit %d, --smtp-max-unauthenticated-per-ip); try again later\r\n"
)

// newLimiter bounds the connections of every listener of the server
// (connlimit): MaxSessions in all, past which a newcomer is told 421
// before go-smtp sees it, so idle clients that never say EHLO count too;
// MaxUnauthenticatedPerIP per client until it authenticates (an
// application opens many sessions from one host, a stranger holds slots
// without credentials); SessionTimeout for a whole connection and
// AuthTimeout to a successful AUTH, both from accept, so a client cannot
// keep its slot by sending NOOPs (each resets only the command timeout).
func (s *Server) newLimiter() *connlimit.Limiter {
	return connlimit.New(connlimit.Config{
		Max: s.cfg.MaxSessions, PerClient: s.cfg.MaxUnauthenticatedPerIP,
		Session: s.cfg.SessionTimeout, ReleaseWithin: s.cfg.AuthTimeout,
		Refusal: func(r connlimit.Reason) []byte {
			if r == connlimit.ClientFull {
				return fmt.Appendf(nil, tooManyFromClient, s.cfg.MaxUnauthenticatedPerIP)
			}
			return tooManyReply
		},
		OnRefuse: func(connlimit.Reason) { s.reject(421) },
	})
}
