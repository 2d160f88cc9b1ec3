package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/sendonce/sendonce/internal/app"
	"github.com/sendonce/sendonce/internal/core"
)

// What every Resend-compatible route shares: Resend's error body, its
// authentication and idempotent-write wrappers, and its list and reference
// objects. The routes themselves are in the other resend_*.go files.

// resendMaxKeyLen is Resend's limit on an Idempotency-Key.
const resendMaxKeyLen = 256

// resendError is Resend's error body.
type resendError struct {
	StatusCode int    `json:"statusCode"`
	Name       string `json:"name"`
	Message    string `json:"message"`
}

// resendErrors is the errorStyle of the Resend routes: the native codes
// mapped to Resend's names and statuses.
func resendErrors(r *http.Request, logger *slog.Logger, err error) (int, any) {
	var e *core.Error
	if !errors.As(err, &e) || e.Code == core.CodeInternal {
		status, _ := errorResponse(r, logger, err) // logs it
		return status, resendError{StatusCode: status, Name: "internal_server_error", Message: "internal error; nothing was stored, a retry with the same Idempotency-Key runs afresh"}
	}
	status, name := statusOf(e.Code), e.Code
	switch e.Code {
	case codeKeyInvalid:
		status, name = http.StatusBadRequest, "invalid_idempotency_key"
	case codeKeyReused:
		status, name = http.StatusConflict, "invalid_idempotent_request"
	case codeKeyInUse:
		status, name = http.StatusConflict, "concurrent_idempotent_requests"
	case core.CodeValidation, core.CodeTemplateMissingVar:
		status, name = http.StatusUnprocessableEntity, "validation_error"
	case core.CodeInvalidJSON:
		status, name = http.StatusBadRequest, "invalid_json"
	case core.CodeForbidden:
		status, name = http.StatusForbidden, "validation_error"
	case core.CodeUnauthorized:
		name = "invalid_api_key"
		if r.Header.Get("Authorization") == "" {
			name = "missing_api_key"
		}
	case core.CodeNotFound:
		name = "not_found"
	case core.CodeRateLimited:
		name = "rate_limit_exceeded" // Resend's name for its 429
	}
	msg := e.Message
	if e.Param != "" && e.Code == core.CodeValidation {
		msg = fmt.Sprintf("%s (field %s)", e.Message, e.Param)
	}
	return status, resendError{StatusCode: status, Name: name, Message: msg}
}

func writeResendError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	status, body := resendErrors(r, logger, err)
	writeJSON(w, status, body)
}

// resendAuth is auth with Resend's error body: 401 for a missing or unknown
// key, 403 restricted_api_key for a key without the scope.
func (s *Server) resendAuth(scope core.Scope, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret, ok := bearer(r.Header)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sendonce"`)
			writeResendError(w, r, s.logger, app.ErrUnauthorized)
			return
		}
		key, err := s.svc.Authenticate(r.Context(), secret)
		if err != nil {
			if core.ErrorCode(err) == core.CodeUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="sendonce"`)
			}
			writeResendError(w, r, s.logger, err)
			return
		}
		if err := s.rateLimit(w, r, key); err != nil {
			writeResendError(w, r, s.logger, err)
			return
		}
		if !key.Has(scope) {
			writeJSON(w, http.StatusForbidden, resendError{StatusCode: http.StatusForbidden, Name: "restricted_api_key",
				Message: fmt.Sprintf("this API key lacks the %q scope", scope)})
			return
		}
		next.ServeHTTP(w, withKey(w, r, key))
	})
}

func (s *Server) resendPost(h txHandler) http.Handler {
	return s.resendAuth(core.ScopeSend, s.idempotent(postOpts{maxKeyLen: resendMaxKeyLen, errs: resendErrors, committed: s.acceptedMetric, audit: true}, h))
}

func (s *Server) acceptedMetric() {
	if s.metrics != nil {
		s.metrics.SendsAccepted.Inc()
	}
}

// resendManage is an idempotent Resend management POST: admin scope,
// Resend's key length and error body.
func (s *Server) resendManage(o postOpts, h txHandler) http.Handler {
	o.maxKeyLen, o.errs = resendMaxKeyLen, resendErrors
	return s.resendAuth(core.ScopeAdmin, s.idempotent(o, h))
}

// resendOpts gives o Resend's key length and error body.
func (s *Server) resendOpts(o postOpts) postOpts {
	o.maxKeyLen, o.errs = resendMaxKeyLen, resendErrors
	return o
}

// resendList is Resend's list object. Emails and suppressions page
// (has_more); the other lists answer every item at once, so has_more is
// false and the pagination parameters change nothing.
type resendList[T any] struct {
	Object  string `json:"object"`
	HasMore bool   `json:"has_more"`
	Data    []T    `json:"data"`
}

// resendRef is the {"object","id"} answer of Resend's updates and actions.
type resendRef struct {
	Object string `json:"object"`
	ID     string `json:"id"`
}

type resendDeleted struct {
	Object  string `json:"object"`
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}
