package kit

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
)

// ResendError is Resend's error body.
type ResendError struct {
	StatusCode int    `json:"statusCode"`
	Name       string `json:"name"`
	Message    string `json:"message"`
}

// ResendErrors is the errorStyle of the Resend routes: the native codes
// mapped to Resend's names and statuses.
func ResendErrors(r *http.Request, logger *slog.Logger, err error) (int, any) {
	var e *core.Error
	if !errors.As(err, &e) || e.Code == core.CodeInternal {
		status, _ := ErrorResponse(r, logger, err) // logs it
		return status, ResendError{StatusCode: status, Name: "internal_server_error", Message: "internal error; nothing was stored, a retry with the same Idempotency-Key runs afresh"}
	}
	status, name := StatusOf(e.Code), e.Code
	switch e.Code {
	case CodeKeyInvalid:
		status, name = http.StatusBadRequest, "invalid_idempotency_key"
	case CodeKeyReused:
		status, name = http.StatusConflict, "invalid_idempotent_request"
	case CodeKeyInUse:
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
	return status, ResendError{StatusCode: status, Name: name, Message: msg}
}

func WriteResendError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	status, body := ResendErrors(r, logger, err)
	WriteJSON(w, status, body)
}
