// Package httpapi is sendonce's HTTP adapter: every route is in routes.go,
// the Idempotency-Key handling in idempotent.go, and the one map from
// application error codes to HTTP statuses in errors.go.
package httpapi
