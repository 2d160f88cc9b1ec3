package idempotency

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"time"
)

// Scope names one key: keys of different tenants, methods or routes never
// meet.
type Scope struct {
	Tenant string
	Method string
	Route  string // the request path, path parameters included
	Key    string
}

// Response is what is stored and replayed.
type Response struct {
	Status      int
	ContentType string
	Body        []byte
}

// State of a stored record.
type State string

const (
	StateInFlight  State = "in_flight"
	StateCompleted State = "completed"
)

// Record is a key's row as a store keeps it.
type Record struct {
	Fingerprint string
	State       State
	Token       string
	LockedUntil time.Time // in flight: the reservation's lease
	ExpiresAt   time.Time // completed: replay until then
	Response    *Response // completed only
}

// Outcome is what a request with a key should do.
type Outcome int

const (
	// Proceed: the caller holds a fresh reservation and runs the request.
	Proceed Outcome = iota + 1
	// Replay: answer with the stored Response.
	Replay
	// InUse: the first request with this key is still running (409).
	InUse
	// Mismatch: the key was used with another request body (422).
	Mismatch
)

func (o Outcome) String() string {
	switch o {
	case Proceed:
		return "proceed"
	case Replay:
		return "replay"
	case InUse:
		return "in_use"
	case Mismatch:
		return "mismatch"
	}
	return "invalid"
}

// Decision is a store's answer to Reserve.
type Decision struct {
	Outcome  Outcome
	Token    string    // Proceed: the reservation's token, needed to complete or release it
	Response *Response // Replay: the stored response
}

// ErrReservationLost is returned by Complete when the reservation is no
// longer the caller's: its lease ran out and another request took it over,
// or it was released. The caller must roll its transaction back.
var ErrReservationLost = errors.New("idempotency reservation lost")

// Decide applies the rules to the existing record (nil when there is none)
// at time now. Proceed means the store should write a new reservation.
func Decide(rec *Record, fingerprint string, now time.Time) Outcome {
	if rec == nil {
		return Proceed
	}
	switch rec.State {
	case StateCompleted:
		if !now.Before(rec.ExpiresAt) {
			return Proceed // past its TTL the key is new again
		}
		if rec.Fingerprint != fingerprint {
			return Mismatch
		}
		return Replay
	default:
		if now.Before(rec.LockedUntil) {
			if rec.Fingerprint != fingerprint {
				return Mismatch
			}
			return InUse
		}
		// The holder died (or is hopelessly slow): take over. Its
		// completion will fail on the token check.
		return Proceed
	}
}

// NewToken returns a random reservation token.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// statusClientClosedRequest is nginx's 499, which servers (sendonce among
// them) log for a request whose client left before the answer.
const statusClientClosedRequest = 499

// ShouldStore reports whether a response with this status is stored as the
// key's outcome: every 2xx and every 4xx the handler itself returns, except
// those that say nothing final about the request (401, 403, 409, 413, 429,
// and 499, nginx's "client closed the request": nobody read it, and the
// work it interrupted rolled back). 5xx is never stored: its transaction
// rolled back, so a retry runs afresh.
func ShouldStore(status int) bool {
	switch {
	case status >= 200 && status < 300:
		return true
	case status >= 400 && status < 500:
		switch status {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusConflict,
			http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, statusClientClosedRequest:
			return false
		}
		return true
	}
	return false
}
