package idempotency

import (
	"net/http"
	"time"

	"github.com/sendonce/sendonce/idempotency/idemtype"
)

// The key's types and rules live in package idemtype (standard library
// only, so that a domain package such as sendonce's internal/core can name
// them); these aliases are this package's API for them.
type (
	// Scope names one key: keys of different tenants, methods or routes
	// never meet.
	Scope = idemtype.Scope
	// Response is what is stored and replayed.
	Response = idemtype.Response
	// State of a stored record.
	State = idemtype.State
	// Record is a key's row as a store keeps it.
	Record = idemtype.Record
	// Outcome is what a request with a key should do.
	Outcome = idemtype.Outcome
	// Decision is a store's answer to Reserve.
	Decision = idemtype.Decision
	// TxRecords is the durable tier as one of the caller's own
	// transactions sees it (see idemtype.TxRecords).
	TxRecords = idemtype.TxRecords
)

// The record states and the outcomes (see idemtype).
const (
	StateInFlight  = idemtype.StateInFlight
	StateCompleted = idemtype.StateCompleted

	Proceed  = idemtype.Proceed
	Replay   = idemtype.Replay
	InUse    = idemtype.InUse
	Mismatch = idemtype.Mismatch
)

// ErrReservationLost is returned by Complete when the reservation is no
// longer the caller's: its lease ran out and another request took it over,
// or it was released. The caller must roll its transaction back.
var ErrReservationLost = idemtype.ErrReservationLost

// Decide applies the rules to the existing record (nil when there is none)
// at time now. Proceed means the store should write a new reservation.
func Decide(rec *Record, fingerprint string, now time.Time) Outcome {
	return idemtype.Decide(rec, fingerprint, now)
}

// NewToken returns a random reservation token.
func NewToken() string { return idemtype.NewToken() }

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
