package resend

import (
	"fmt"
	"net/http"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
	"github.com/sendonce/sendonce/internal/httpapi/kit"
)

// What every Resend-compatible route shares: Resend's error body, its
// authentication and idempotent-write wrappers, and its list and reference
// objects. The routes themselves are in the other resend_*.go files.

// resendMaxKeyLen is Resend's limit on an Idempotency-Key.
const resendMaxKeyLen = 256

// resendAuth is auth with Resend's error body: 401 for a missing or unknown
// key, 403 restricted_api_key for a key without the scope.
func (s *API) Auth(scope core.Scope, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret, ok := kit.Bearer(r.Header)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sendonce"`)
			kit.WriteResendError(w, r, s.Logger, app.ErrUnauthorized)
			return
		}
		key, err := s.Svc.Authenticate(r.Context(), secret)
		if err != nil {
			if core.ErrorCode(err) == core.CodeUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="sendonce"`)
			}
			kit.WriteResendError(w, r, s.Logger, err)
			return
		}
		if err := s.RateLimit(w, r, key); err != nil {
			kit.WriteResendError(w, r, s.Logger, err)
			return
		}
		if !key.Has(scope) {
			kit.WriteJSON(w, http.StatusForbidden, kit.ResendError{StatusCode: http.StatusForbidden, Name: "restricted_api_key",
				Message: fmt.Sprintf("this API key lacks the %q scope", scope)})
			return
		}
		next.ServeHTTP(w, kit.WithKey(w, r, key))
	})
}

func (s *API) Post(h kit.TxHandler) http.Handler {
	return s.Auth(core.ScopeSend, s.Idempotent(kit.PostOpts{MaxKeyLen: resendMaxKeyLen, Errs: kit.ResendErrors, Committed: s.acceptedMetric, Audit: true}, h))
}

func (s *API) acceptedMetric() {
	if s.Metrics != nil {
		s.Metrics.SendsAccepted.Inc()
	}
}

// resendManage is an idempotent Resend management POST: admin scope,
// Resend's key length and error body.
func (s *API) Manage(o kit.PostOpts, h kit.TxHandler) http.Handler {
	o.MaxKeyLen, o.Errs = resendMaxKeyLen, kit.ResendErrors
	return s.Auth(core.ScopeAdmin, s.Idempotent(o, h))
}

// resendOpts gives o Resend's key length and error body.
func (s *API) Opts(o kit.PostOpts) kit.PostOpts {
	o.MaxKeyLen, o.Errs = resendMaxKeyLen, kit.ResendErrors
	return o
}

// resendRef is the {"object","id"} answer of Resend's updates and actions.
type resendRef struct {
	Object string `json:"object"`
	ID     string `json:"id"`
}

// API serves Resend's routes on the shared plumbing; its handlers are named
// for what they do and wired by httpapi's one route table.
type API struct{ *kit.Base }
