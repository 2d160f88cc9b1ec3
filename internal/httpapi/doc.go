// Package httpapi is sendonce's HTTP adapter. It serves three surfaces:
// the native /v1 (plain-named files), Resend's (resend_*.go) and
// Mailera's (mailera_*.go). Every route of all three is in routes.go, the
// Idempotency-Key handling in idempotent.go, and the one map from
// application error codes to HTTP statuses in errors.go.
package httpapi
