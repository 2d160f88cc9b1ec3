package kit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"

	"github.com/sendonce/sendonce/idempotency"
	"github.com/sendonce/sendonce/internal/core"
)

// API error codes of the HTTP layer. Those about the Idempotency-Key and
// the body's size are the idempotency package's (its middleware answers
// them too); the application's are core's.
const (
	codeKeyRequired     = idempotency.CodeKeyRequired
	CodeKeyInvalid      = idempotency.CodeKeyInvalid
	CodeKeyInUse        = idempotency.CodeKeyInUse
	CodeKeyReused       = idempotency.CodeKeyReused
	CodePayloadTooLarge = idempotency.CodePayloadTooLarge
	CodeMethodNotAllow  = "method_not_allowed"
	// codeAnswerUnavailable: the key's request ran, but its stored answer
	// is sealed under a SENDONCE_SECRET_KEY this process does not hold
	// (sealed.go). Gone for good; the request never runs again.
	codeAnswerUnavailable = "stored_answer_unavailable"
)

// ErrorStatus is the one table from error codes to HTTP statuses: the
// server answers with it, and the client SDK's codes are held against it
// (client's TestCodes_MatchTheServersTable). A code not in it is a 500.
var ErrorStatus = map[string]int{
	core.CodeValidation:         http.StatusUnprocessableEntity,
	core.CodeTemplateMissingVar: http.StatusUnprocessableEntity,
	CodeKeyReused:               http.StatusUnprocessableEntity,
	core.CodeInvalidJSON:        http.StatusBadRequest,
	codeKeyRequired:             http.StatusBadRequest,
	CodeKeyInvalid:              http.StatusBadRequest,
	core.CodeNotFound:           http.StatusNotFound,
	core.CodeInvalidState:       http.StatusConflict,
	core.CodeConflict:           http.StatusConflict,
	CodeKeyInUse:                http.StatusConflict,
	core.CodeUnauthorized:       http.StatusUnauthorized,
	core.CodeForbidden:          http.StatusForbidden,
	core.CodeLimitExceeded:      http.StatusForbidden,
	core.CodeRateLimited:        http.StatusTooManyRequests,
	core.CodeUnavailable:        http.StatusServiceUnavailable,
	CodePayloadTooLarge:         http.StatusRequestEntityTooLarge,
	CodeMethodNotAllow:          http.StatusMethodNotAllowed,
	codeAnswerUnavailable:       http.StatusGone,
	core.CodeInternal:           http.StatusInternalServerError,
}

// StatusOf maps an application error code to its HTTP status.
func StatusOf(code string) int {
	if s, ok := ErrorStatus[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// ErrorStatuses returns a copy of the code-to-status table, for the
// client's test and the API reference's.
func ErrorStatuses() map[string]int {
	return maps.Clone(ErrorStatus)
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

func NewErrorBody(code, message, param string) errorBody {
	d := errorDetail{Code: code, Message: message}
	if param != "" {
		d.Param = &param
	}
	return errorBody{d}
}

// ErrorResponse turns err into a status and body. Internal errors are logged
// here and shown to nobody.
func ErrorResponse(r *http.Request, logger *slog.Logger, err error) (int, errorBody) {
	var e *core.Error
	if errors.As(err, &e) && e.Code != core.CodeInternal {
		if e.Code == core.CodeUnavailable {
			logger.WarnContext(r.Context(), "database unavailable", slog.String("path", r.URL.Path), slog.Any("error", err))
		}
		return StatusOf(e.Code), NewErrorBody(e.Code, e.Message, e.Param)
	}
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// Not a fault of ours: the client left while its request waited
		// (say, for its turn at the database writer). Nobody reads this
		// answer; the status keeps it out of the 5xx counts.
		logger.InfoContext(r.Context(), "client went away before the answer", slog.String("path", r.URL.Path))
		return StatusClientClosedRequest, NewErrorBody(core.CodeInternal, "the client closed the request; nothing was stored", "")
	}
	logger.ErrorContext(r.Context(), "internal error", slog.String("path", r.URL.Path), slog.Any("error", err))
	return http.StatusInternalServerError, NewErrorBody(core.CodeInternal, "internal error; nothing was stored, a retry with the same Idempotency-Key runs afresh", "")
}

// StatusClientClosedRequest is what logs and metrics record for a request
// whose client left before it was answered (nginx's 499).
const StatusClientClosedRequest = 499

// Marshal encodes a response body. HTML escaping is off: addresses like
// "<a@b>" stay readable, and the content type is JSON, never HTML.
func Marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only our own view types reach here.
		panic("httpapi: marshal: " + err.Error())
	}
	return b.Bytes()
}

func WriteJSON(w http.ResponseWriter, status int, v any) {
	WriteRaw(w, status, "application/json", Marshal(v))
}

// retryAfterUnavailable is the Retry-After of a 503: a database restart
// or a cut connection is usually over within seconds.
const retryAfterUnavailable = "1"

func WriteRaw(w http.ResponseWriter, status int, contentType string, body []byte) {
	if status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", retryAfterUnavailable) // every 503 says when to come back
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func WriteError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	status, body := ErrorResponse(r, logger, err)
	WriteJSON(w, status, body)
}

// Answer ends a read or a synchronous change: err in the native error
// body, else v with 200.
func (s *Base) Answer(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		WriteError(w, r, s.Logger, err)
		return
	}
	WriteJSON(w, http.StatusOK, v)
}

// AnswerResend is Answer with Resend's error body.
func (s *Base) AnswerResend(w http.ResponseWriter, r *http.Request, v any, err error) {
	if err != nil {
		WriteResendError(w, r, s.Logger, err)
		return
	}
	WriteJSON(w, http.StatusOK, v)
}

// Shown is view(v) for Answer, or nil when err is set: a failed read's v
// is nil, which a view must not be given. With it one Answer ends a read
// of one thing: s.Answer(w, r, kit.Shown(x, err, viewX), err).
func Shown[T, V any](v T, err error, view func(T) V) any {
	if err != nil {
		return nil
	}
	return view(v)
}

func ApiError(code, param, msg string) *core.Error {
	return &core.Error{Code: code, Param: param, Message: msg}
}

// writeStyled writes err in the error shape of the route's style.
func writeStyled(w http.ResponseWriter, r *http.Request, s *Base, err error) {
	if isResendPath(r.URL.Path) {
		WriteResendError(w, r, s.Logger, err)
		return
	}
	WriteError(w, r, s.Logger, err)
}

func isResendPath(p string) bool { return len(p) >= 7 && p[:7] == "/emails" }
