// Package idemtype holds what every idempotency store speaks: what a key
// is (Scope), what is kept for it (Record, Response), a store's answer
// (Decision, Outcome) and the rules that decide a request (Decide). It is
// a leaf, as river keeps its job types in rivertype: it imports the
// standard library only, so that a domain package — sendonce's
// internal/core, which must not link HTTP, SQL or Redis — can name these
// types without importing package idempotency and its middleware and
// stores. Package idempotency re-exports every name here; a user of the
// middleware imports that, a store or a domain package may import this.
package idemtype

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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

// ErrContended is a store's answer when Reserve lost every
// compare-and-set it may try: the key changed under it each time.
var ErrContended = errors.New("idempotency key changed on every attempt")

// Expired reports whether r neither replays nor holds its key at now: a
// completed record from its ExpiresAt on, a reservation from its
// LockedUntil on. Decide treats an expired record as absent, and it is the
// one rule by which every store drops records: MemoryStore's sweep,
// SQLStore.Purge and sendonce's PurgeIdempotency delete exactly the
// expired ones, and redisstore sets a record's Redis TTL to end then.
// Nothing is kept longer, since nothing would read it: the next request
// with the key proceeds whether the record is still there or not.
func (r *Record) Expired(now time.Time) bool {
	if r.State == StateCompleted {
		return !now.Before(r.ExpiresAt)
	}
	return !now.Before(r.LockedUntil)
}

// Decide applies the rules to the existing record (nil when there is none)
// at time now. Proceed means the store should write a new reservation.
func Decide(rec *Record, fingerprint string, now time.Time) Outcome {
	if rec == nil || rec.Expired(now) {
		// Past its TTL the key is new again. Past its lease the holder
		// died (or is hopelessly slow): take over; its completion will
		// fail on the token check.
		return Proceed
	}
	switch {
	case rec.Fingerprint != fingerprint:
		return Mismatch
	case rec.State == StateCompleted:
		return Replay
	default:
		return InUse
	}
}

// NewToken returns a random reservation token.
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// TxRecords is the durable tier as one of the caller's own transactions
// sees it: the key is decided and its answer written inside the
// transaction that does the request's work, so the work and its stored
// answer commit together or not at all, with one record write. sendonce's
// store implements it on SQLite and PostgreSQL; the conformance suite
// (idempotencytest.RunTx) specifies it.
type TxRecords interface {
	// DecideIdempotency reads sc's record inside the transaction and
	// decides the request (see Decide). On Proceed the key belongs to the
	// transaction until it ends: a concurrent transaction deciding the
	// same key waits for it or gets InUse, never Proceed. Nothing is
	// written until PutIdempotency; the Decision's Token is passed to it.
	DecideIdempotency(ctx context.Context, sc Scope, fingerprint string, now time.Time) (Decision, error)
	// PutIdempotency writes sc's completed record inside the transaction:
	// resp replays until expires.
	PutIdempotency(ctx context.Context, sc Scope, fingerprint, token string, resp Response, now, expires time.Time) error
}
