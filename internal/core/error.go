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
	// CodeUnavailable: the database could not be reached (restarting,
	// unreachable, out of connections); nothing was done (503 with
	// Retry-After).
	CodeUnavailable = "service_unavailable"
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

// ErrUnavailable is the *Error of a store that could not be reached: what
// a caller is shown when Unavailable marked the failure.
var ErrUnavailable = &Error{Code: CodeUnavailable,
	Message: "the database is unavailable for a moment; nothing was stored: retry with the same Idempotency-Key after Retry-After"}

// Unavailable marks err, a failure to reach the store, as ErrUnavailable:
// errors.As finds ErrUnavailable in its chain (so ErrorCode is
// CodeUnavailable), while Error and Unwrap keep the cause for the logs.
// The store decides which of its failures are such; nil stays nil.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return &unavailable{err: err}
}

type unavailable struct{ err error }

func (u *unavailable) Error() string        { return u.err.Error() }
func (u *unavailable) Unwrap() error        { return u.err }
func (u *unavailable) Is(target error) bool { return target == ErrUnavailable }

// As makes errors.As(err, &e) with e a *Error find ErrUnavailable.
func (u *unavailable) As(target any) bool {
	if e, ok := target.(**Error); ok {
		*e = ErrUnavailable
		return true
	}
	return false
}

// Conflicted marks err, a transaction that met another one (a deadlock or a
// serialization failure on PostgreSQL), as work to run again as it is:
// nothing of it committed and nothing was wrong with it. Code that meets
// such an error inside a transaction returns it as it is — never answers
// it — so that the store can run the transaction again. The store decides
// which of its failures are such; nil stays nil.
func Conflicted(err error) error {
	if err == nil || IsConflicted(err) {
		return err
	}
	return &conflicted{err: err}
}

// IsConflicted reports whether Conflicted marked err.
func IsConflicted(err error) bool {
	var c *conflicted
	return errors.As(err, &c)
}

type conflicted struct{ err error }

func (c *conflicted) Error() string { return c.err.Error() }
func (c *conflicted) Unwrap() error { return c.err }
