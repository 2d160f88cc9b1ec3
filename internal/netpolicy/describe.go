package netpolicy

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"syscall"
)

// Failure classes returned by Describe.
const (
	FailBlocked     = "blocked by the outbound policy"
	FailRefused     = "connection refused"
	FailTimeout     = "timed out"
	FailUnreachable = "host unreachable"
	FailDNS         = "name does not resolve"
	FailTLS         = "TLS failed"
	FailOther       = "connection failed"
)

// Describe reduces a connection-level failure to its class, one of the
// Fail constants, and nothing of what the remote side said or which
// address answered. Use it wherever a caller must not learn more than
// whether a destination works.
func Describe(err error) string {
	var (
		dnsErr *net.DNSError
		tlsErr *tls.RecordHeaderError
		certV  *tls.CertificateVerificationError
		ne     net.Error
	)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrBlocked):
		return FailBlocked
	case errors.Is(err, syscall.ECONNREFUSED):
		return FailRefused
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return FailTimeout
	case errors.As(err, &ne) && ne.Timeout():
		return FailTimeout
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return FailUnreachable
	case errors.As(err, &dnsErr):
		return FailDNS
	case errors.As(err, &tlsErr), errors.As(err, &certV):
		return FailTLS
	}
	return FailOther
}
