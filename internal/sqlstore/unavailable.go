package sqlstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sendonce/sendonce/internal/core"
)

// pgUnavailable marks a PostgreSQL failure that says the server could not
// be reached or used — connect refused or cut, the connection lost, the
// server shutting down or out of connections — as core.Unavailable, so
// that the API answers 503 with Retry-After instead of 500. Other errors
// (a constraint, a bad statement, a canceled context) are returned as
// they are.
func pgUnavailable(err error) error {
	if err == nil {
		return nil
	}
	if retryable(err) {
		// A deadlock's victim or a serialization failure: the group
		// commit runs the batch again, and the handler that met it must
		// pass it up unanswered (core.Conflicted).
		return core.Conflicted(err)
	}
	if !pgConnFailure(err) {
		return err
	}
	return core.Unavailable(err)
}

func pgConnFailure(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 08: connection exception; 57P01–57P03: the server is
		// shutting down or starting; 53300: too many connections.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" ||
			pe.Code == "57P03" || pe.Code == "53300"
	}
	var ce *pgconn.ConnectError
	var oe *net.OpError
	return errors.As(err, &ce) || errors.As(err, &oe) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}
