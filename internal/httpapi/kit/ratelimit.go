package kit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/ratelimit"
)

// The RateLimit fields as Resend and useSend send them (one number each;
// reset in seconds from now): the form of the IETF draft
// draft-ietf-httpapi-ratelimit-headers up to -06, not the structured
// RateLimit / RateLimit-Policy fields of its later versions, because
// clients written against those services read these three.
const (
	headerLimit     = "RateLimit-Limit"
	headerRemaining = "RateLimit-Remaining"
	headerReset     = "RateLimit-Reset"
)

// keyLimit is the request limit of key: its own RateLimit when set, else
// the server's; off when either says so.
func (s *Base) keyLimit(key *core.APIKey) ratelimit.Limit {
	l := s.Cfg.RateLimit
	switch {
	case key.RateLimit < 0:
		return ratelimit.Limit{}
	case key.RateLimit > 0 && l.Window > 0:
		l.Requests = key.RateLimit
	}
	return l
}

// RateLimit counts an authenticated request against its key's limit and
// sets the RateLimit headers on whatever the route answers. Past the
// limit it returns the 429 to send (with Retry-After set); the request
// has then cost no database work beyond its key's cached lookup.
//
// Every request counts, a replay of an Idempotency-Key included: telling
// a replay apart means reading and fingerprinting the body and looking
// the key up, the work a refusal exists to save. A 429 is never stored
// under the key, so the retry after Retry-After gets the original answer.
func (s *Base) RateLimit(w http.ResponseWriter, r *http.Request, key *core.APIKey) error {
	l := s.keyLimit(key)
	if s.Limiter == nil || !l.On() {
		return nil
	}
	res, err := s.Limiter.Take(r.Context(), key.ID, l)
	if err != nil {
		return nil // the limiters log and fall back; a guard never fails a request
	}
	reset := strconv.Itoa(ceilSeconds(res.Reset))
	h := w.Header()
	h.Set(headerLimit, strconv.Itoa(res.Limit))
	h.Set(headerRemaining, strconv.Itoa(res.Remaining))
	h.Set(headerReset, reset)
	if res.Allowed {
		return nil
	}
	h.Set("Retry-After", reset)
	return &core.Error{Code: core.CodeRateLimited, RetryAfter: res.Reset,
		Message: "this API key sent more than " + strconv.Itoa(res.Limit) + " requests in " + l.Window.String() + "; retry after Retry-After seconds"}
}

// ceilSeconds is d in whole seconds, rounded up: a client that waits that
// long is in the next window.
func ceilSeconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}
