package idempotency

import (
	"context"
	"database/sql"
	"time"
)

// Store keeps idempotency records. Every implementation behaves alike (the
// package's conformance suite runs against each): Reserve reads the record
// and, when Decide says Proceed, writes a fresh reservation in one atomic
// step, so no second request can slip between the check and the lock.
//
// Implementations: MemoryStore, SQLStore (SQLite and PostgreSQL) and
// redisstore.Store (package idempotency/redisstore).
type Store interface {
	// Reserve decides what a request with scope sc and this request-body
	// fingerprint does at time now (see Decide). On Proceed the store has
	// written a reservation that holds the key for lease and returns its
	// token.
	Reserve(ctx context.Context, sc Scope, fingerprint string, now time.Time, lease time.Duration) (Decision, error)
	// Complete stores resp as the key's outcome, replayed until expires. It
	// returns ErrReservationLost when token no longer holds the key (its
	// lease ran out and another request took it over, or it was released).
	Complete(ctx context.Context, sc Scope, token string, resp Response, now, expires time.Time) error
	// Release drops the reservation held by token so that a retry runs
	// afresh. It does nothing when token no longer holds the key, or when
	// the key is completed.
	Release(ctx context.Context, sc Scope, token string) error
}

// TxStore is the optional capability of a store that lives in a SQL
// database: the handler's own writes and the stored response can commit in
// one transaction. SQLStore implements it; Options.RunInTx uses it.
type TxStore interface {
	Store
	// BeginTx starts the transaction the handler writes in.
	BeginTx(ctx context.Context) (*sql.Tx, error)
	// CompleteTx is Complete inside tx; the caller commits or rolls back.
	CompleteTx(ctx context.Context, tx *sql.Tx, sc Scope, token string, resp Response, now, expires time.Time) error
}
