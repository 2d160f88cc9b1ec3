package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/sendonce/sendonce/internal/core"
)

// API error codes that exist only at the HTTP layer.
const (
	codeKeyRequired     = "idempotency_key_required"
	codeKeyInvalid      = "idempotency_key_invalid"
	codeKeyInUse        = "idempotency_key_in_use"
	codeKeyReused       = "idempotency_key_reused"
	codePayloadTooLarge = "payload_too_large"
	codeMethodNotAllow  = "method_not_allowed"
)

// statusOf is the one map from application error codes to HTTP statuses.
// The client SDK reverses it.
func statusOf(code string) int {
	switch code {
	case core.CodeValidation, core.CodeTemplateMissingVar, codeKeyReused:
		return http.StatusUnprocessableEntity
	case core.CodeInvalidJSON, codeKeyRequired, codeKeyInvalid:
		return http.StatusBadRequest
	case core.CodeNotFound:
		return http.StatusNotFound
	case core.CodeInvalidState, core.CodeConflict, codeKeyInUse:
		return http.StatusConflict
	case core.CodeUnauthorized:
		return http.StatusUnauthorized
	case core.CodeForbidden:
		return http.StatusForbidden
	case core.CodeRateLimited:
		return http.StatusTooManyRequests
	case core.CodeUnavailable:
		return http.StatusServiceUnavailable
	case codePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case codeMethodNotAllow:
		return http.StatusMethodNotAllowed
	}
	return http.StatusInternalServerError
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

// errorDetail is the error body of the contract; param is null when the
// error concerns no single field.
type errorDetail struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
}

func newErrorBody(code, message, param string) errorBody {
	d := errorDetail{Code: code, Message: message}
	if param != "" {
		d.Param = &param
	}
	return errorBody{d}
}

// errorResponse turns err into a status and body. Internal errors are logged
// here and shown to nobody.
func errorResponse(r *http.Request, logger *slog.Logger, err error) (int, errorBody) {
	var e *core.Error
	if errors.As(err, &e) && e.Code != core.CodeInternal {
		if e.Code == core.CodeUnavailable {
			logger.WarnContext(r.Context(), "database unavailable", slog.String("path", r.URL.Path), slog.Any("error", err))
		}
		return statusOf(e.Code), newErrorBody(e.Code, e.Message, e.Param)
	}
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// Not a fault of ours: the client left while its request waited
		// (say, for its turn at the database writer). Nobody reads this
		// answer; the status keeps it out of the 5xx counts.
		logger.InfoContext(r.Context(), "client went away before the answer", slog.String("path", r.URL.Path))
		return StatusClientClosedRequest, newErrorBody(core.CodeInternal, "the client closed the request; nothing was stored", "")
	}
	logger.ErrorContext(r.Context(), "internal error", slog.String("path", r.URL.Path), slog.Any("error", err))
	return http.StatusInternalServerError, newErrorBody(core.CodeInternal, "internal error; nothing was stored, a retry with the same Idempotency-Key runs afresh", "")
}

// StatusClientClosedRequest is what logs and metrics record for a request
// whose client left before it was answered (nginx's 499).
const StatusClientClosedRequest = 499

// marshal encodes a response body. HTML escaping is off: addresses like
// "<a@b>" stay readable, and the content type is JSON, never HTML.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only our own view types reach here.
		panic("httpapi: marshal: " + err.Error())
	}
	return b.Bytes()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	writeRaw(w, status, "application/json", marshal(v))
}

// retryAfterUnavailable is the Retry-After of a 503: a database restart
// or a cut connection is usually over within seconds.
const retryAfterUnavailable = "1"

func writeRaw(w http.ResponseWriter, status int, contentType string, body []byte) {
	if status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", retryAfterUnavailable) // every 503 says when to come back
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	status, body := errorResponse(r, logger, err)
	writeJSON(w, status, body)
}

func apiError(code, param, msg string) *core.Error {
	return &core.Error{Code: code, Param: param, Message: msg}
}
