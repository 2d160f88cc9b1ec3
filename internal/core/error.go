package core

import (
	"errors"
	"fmt"
	"time"
)

// Error codes that callers (HTTP mapping, the client SDK) branch on.
const (
	CodeValidation         = "validation_error"
	CodeInvalidJSON        = "invalid_json"
	CodeNotFound           = "not_found"
	CodeInvalidState       = "invalid_state"
	CodeTemplateMissingVar = "template_variable_missing"
	CodeUnauthorized       = "unauthorized"
	CodeForbidden          = "forbidden"
	CodeConflict           = "conflict"
	CodeInternal           = "internal_error"
	// CodeRateLimited: a per-key send cap is reached (429).
	CodeRateLimited = "rate_limited"
)

// Error is sendonce's one application error: a code from the list above, a
// message safe to show a caller, and the request field it concerns.
type Error struct {
	Code    string
	Message string
	Param   string
	// RetryAfter, when set, is how long the caller should wait before it
	// tries again (a send cap's window, say): HTTP's Retry-After.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("%s: %s (%s)", e.Code, e.Message, e.Param)
	}
	return e.Code + ": " + e.Message
}

// Errorf builds an *Error.
func Errorf(code, param, format string, args ...any) *Error {
	return &Error{Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the *Error in err's chain, or CodeInternal
// for any other non-nil error.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrNotFound is returned by stores when a row does not exist (for the
// caller's tenant).
var ErrNotFound = &Error{Code: CodeNotFound, Message: "not found"}
