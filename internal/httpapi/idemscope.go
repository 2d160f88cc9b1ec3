package httpapi

import (
	"net/http"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
)

// unscopedReplay answers a restricted key's retry whose first request was
// stored under the plain key, before keys were scoped
// (app.Service.UnscopedReplay), and reports whether it did. An unrestricted
// key's key is stored plain as it always was: nothing to look up.
func (s *Server) unscopedReplay(r *http.Request, o postOpts, key *core.APIKey, sc idempotency.Scope, idemKey, fp string) (result, bool) {
	if !key.OwnsIdempotencyKeys() {
		return result{}, false
	}
	plain := sc
	plain.Key = idemKey
	resp, err := s.svc.UnscopedReplay(r.Context(), plain, fp, s.idem.TTL())
	switch {
	case err != nil:
		return s.refusal(r, o, err), true
	case resp == nil:
		return result{}, false
	}
	res := s.decided(r, o, idempotency.Decision{Outcome: idempotency.Replay, Response: resp})
	res.idemKey = idemKey
	return res, true
}
