package httpapi

import (
	"net/http"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
)

// olderFormReplay answers a restricted key's retry whose first request was
// stored under a form older versions used — the plain key, or the one
// naming the API key (app.Service.OlderFormReplay) — and reports whether it
// did. An unrestricted key's key is stored plain as it always was: nothing
// to look up.
func (s *Server) olderFormReplay(r *http.Request, o postOpts, key *core.APIKey, sc idempotency.Scope, idemKey, fp string) (result, bool) {
	if !key.OwnsIdempotencyKeys() {
		return result{}, false
	}
	plain, perKey := sc, sc
	plain.Key = idemKey
	perKey.Key = core.KeyScopedIdempotencyKey(key, idemKey)
	resp, err := s.svc.OlderFormReplay(r.Context(), []idempotency.Scope{plain, perKey}, fp, s.idem.TTL())
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
