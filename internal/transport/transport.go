package transport

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Envelope is the SMTP envelope of one message: bare addresses (no display
// names). An empty From is the null reverse-path ("<>").
type Envelope struct {
	From string
	To   []string
	// FromFor, when set, is the envelope sender of a transaction that
	// carries rcpt alone (a bounce address bound to that recipient); a
	// transport that splits To into transactions uses it for those of
	// one recipient, and From for the others.
	FromFor func(rcpt string) string
}

// FromOf is the envelope sender of a transaction carrying rcpts.
func (e Envelope) FromOf(rcpts []string) string {
	if len(rcpts) == 1 && e.FromFor != nil {
		return e.FromFor(rcpts[0])
	}
	return e.From
}

// Class says what a failed attempt means for the send.
type Class int

const (
	// Temporary means retry later: an SMTP 4xx, or any failure before the
	// server answered DATA with 354 (dial, TLS, greeting, EHLO, AUTH, MAIL,
	// RCPT, network errors), since no message can have been taken yet.
	Temporary Class = iota + 1
	// Permanent means do not retry: an SMTP 5xx at any stage, or a message
	// whose envelope can never be sent.
	Permanent
	// Ambiguous means the connection broke or timed out after DATA was
	// accepted (354) and before the final reply to the end of data: the
	// relay may have queued the message, so it must never be retried
	// automatically.
	Ambiguous
)

// String returns "temporary", "permanent" or "ambiguous".
func (c Class) String() string {
	switch c {
	case Temporary:
		return "temporary"
	case Permanent:
		return "permanent"
	case Ambiguous:
		return "ambiguous"
	default:
		return fmt.Sprintf("Class(%d)", int(c))
	}
}

// Stages of an SMTP attempt, as reported in Error.Stage.
const (
	StageDial     = "dial"     // TCP connect (and local configuration errors)
	StageTLS      = "tls"      // implicit TLS or STARTTLS negotiation
	StageGreeting = "greeting" // reading the server's 220 greeting
	StageEHLO     = "ehlo"
	StageAuth     = "auth"
	StageMail     = "mail"
	StageRcpt     = "rcpt"
	StageData     = "data"     // the DATA command, up to its 354 reply
	StageDataEnd  = "data-end" // the message body and the reply to its end
	StageQuit     = "quit"
	StageRset     = "rset" // RSET on a reused session (a failure there is never the message's)
)

// Error is every failure Deliver returns.
type Error struct {
	Class Class
	// Reached is true once the server sent its greeting (whatever its code):
	// the attempt reached the relay.
	Reached bool
	// Code is the SMTP reply code when the failure was a server reply, else 0.
	Code int
	// Stage is one of the Stage constants.
	Stage string
	// Err is the underlying error. It never contains the relay password.
	Err error
	// MaybeAccepted (Temporary only, providers with idempotency keys): the
	// provider may hold the message, so the attempt is retried with the
	// same key on the same provider and never failed over (provider.go).
	MaybeAccepted bool
	// RetryAfter is the provider's own Retry-After, when it gave one.
	RetryAfter time.Duration
}

// Error describes the failure; it never contains credentials.
func (e *Error) Error() string {
	msg := fmt.Sprintf("transport: %s failure at %s", e.Class, e.Stage)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	} else if e.Code != 0 {
		msg += fmt.Sprintf(": SMTP reply %d", e.Code)
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ClassOf returns the Class of the *Error in err's chain. Any other non-nil
// error counts as Temporary, because an unexplained failure must not be
// mistaken for a final answer. ClassOf(nil) is 0: there was no failure.
func ClassOf(err error) Class {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return Temporary
}

// Transport hands one message to the next hop.
type Transport interface {
	// Deliver returns nil only when the server answered 2xx to the end of
	// DATA; any other outcome is an *Error.
	Deliver(ctx context.Context, env Envelope, raw []byte) error
}
