package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// API error codes the client branches on. The server may answer others;
// [Error.Code] carries whatever it said.
const (
	CodeValidation         = "validation_error"
	CodeInvalidJSON        = "invalid_json"
	CodeNotFound           = "not_found"
	CodeInvalidState       = "invalid_state"
	CodeConflict           = "conflict"
	CodeTemplateMissingVar = "template_variable_missing"
	CodeUnauthorized       = "unauthorized"
	CodeForbidden          = "forbidden"
	CodeInternal           = "internal_error"
	CodePayloadTooLarge    = "payload_too_large"
	CodeMethodNotAllowed   = "method_not_allowed"
	// CodeLimitExceeded: the tenant stores as many templates, mailboxes,
	// domains or keys as it may (Error.Param names which). Not retried:
	// only deleting some makes room.
	CodeLimitExceeded = "limit_exceeded"
	// CodeRateLimited: the key reached its request limit or a send cap;
	// Error.RetryAfter says when it may try again. Retried after that wait.
	CodeRateLimited = "rate_limited"
	// CodeUnavailable: the server's database could not be reached for a
	// moment; nothing was done. Retried after Retry-After.
	CodeUnavailable = "service_unavailable"
	CodeKeyRequired = "idempotency_key_required"
	CodeKeyInvalid  = "idempotency_key_invalid"
	// CodeKeyInUse: a request with the same key is still running. Retried.
	CodeKeyInUse = "idempotency_key_in_use"
	// CodeKeyReused: the key was used before with a different body. The
	// server will not guess which of the two was meant; neither does the
	// client. Never retried, never answered with a new key.
	CodeKeyReused = "idempotency_key_reused"
	// CodeStoredAnswerUnavailable: the key's request ran, but the server
	// can no longer open its stored answer (sealed under a secret key since
	// changed). Never retried: the request will not run again.
	CodeStoredAnswerUnavailable = "stored_answer_unavailable"
	// CodeHTTP is set when a response was not the API's JSON error (a
	// proxy's 502 page, say).
	CodeHTTP = "http_error"
)

// Error is an answer of the API that was not a success: the HTTP status and
// the body's {"error": {"code", "message", "param"}}.
type Error struct {
	Status  int
	Code    string
	Message string
	Param   string
	// RetryAfter is the response's Retry-After, zero when it had none.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
	if e.Param != "" {
		s += " (" + e.Param + ")"
	}
	return s
}

// retryable reports whether the same request may be sent again: the server
// either did nothing (5xx: its transaction rolled back; 429) or is still
// working on the same key (409 idempotency_key_in_use).
func (e *Error) retryable() bool {
	switch {
	case e.Status >= 500:
		return true
	case e.Status == http.StatusTooManyRequests:
		return true
	case e.Status == http.StatusConflict && e.Code == CodeKeyInUse:
		return true
	}
	return false
}

// CallError is every error of a call that started: it says which request it
// was, which Idempotency-Key every attempt carried, and how many attempts
// were made. Err is the last attempt's error (an [*Error], a transport
// error, or the context's error).
type CallError struct {
	Method, Path   string
	IdempotencyKey string // "" for calls without one (GET, PUT, DELETE)
	Attempts       int
	Err            error
}

func (e *CallError) Error() string {
	s := fmt.Sprintf("%s %s", e.Method, e.Path)
	if e.IdempotencyKey != "" {
		s += " (Idempotency-Key " + e.IdempotencyKey + ")"
	}
	if e.Attempts > 1 {
		s += fmt.Sprintf(", %d attempts", e.Attempts)
	}
	return s + ": " + e.Err.Error()
}

func (e *CallError) Unwrap() error { return e.Err }

// ErrInvalidRequest wraps errors the client finds before sending anything
// (a bad key, a missing id, a body that does not marshal). Never retryable.
var ErrInvalidRequest = errors.New("sendonce: invalid request")

// IdempotencyKeyOf returns the Idempotency-Key a failed call used, "" when
// it had none. Use it to look the send up (Client.SendByKey) or to retry with
// the same key; never make a new one for the same email.
func IdempotencyKeyOf(err error) string {
	var ce *CallError
	if errors.As(err, &ce) {
		return ce.IdempotencyKey
	}
	return ""
}

// IsRetryable reports whether err is transient, so that the same request
// with the same key may be tried again: a transport error, a timeout, 409
// idempotency_key_in_use, 429 or a 5xx. Any other 4xx is the server's final
// answer and is not retryable, and neither is a cancelled context.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrInvalidRequest) || errors.Is(err, context.Canceled) {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return e.retryable()
	}
	var de *decodeError
	if errors.As(err, &de) {
		return false
	}
	return true // transport errors and timeouts
}

// IsRejected reports whether the server answered err as its final word on
// the request: a 4xx other than 409 idempotency_key_in_use and 429. The same
// request will never succeed; a person (or a code fix) must look. This
// includes 422 idempotency_key_reused: the key was used with another body.
func IsRejected(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status >= 400 && e.Status < 500 && !e.retryable()
}

// IsOutcomeUnknown reports whether a failed call may nevertheless have done
// its work: the answer got lost (transport error, timeout, cancelled
// context, an unreadable success) or was not the server's final word (5xx,
// 409 in use, 429). Look the send up by its key before anything else; never
// send it again under a new key.
func IsOutcomeUnknown(err error) bool {
	return err != nil && !IsRejected(err) && !errors.Is(err, ErrInvalidRequest)
}

// IsNotFound reports a 404 not_found.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// ErrorCode returns the API code of the *Error in err's chain, "" if none.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// decodeError is a 2xx whose body did not decode: the work may have been
// done, so it is an unknown outcome, but sending the same bytes again will
// not make the answer readable.
type decodeError struct{ err error }

func (e *decodeError) Error() string {
	return "sendonce: unreadable success response: " + e.err.Error()
}
func (e *decodeError) Unwrap() error { return e.err }
