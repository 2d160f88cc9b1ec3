// Package idempotency implements the Idempotency-Key state machine that
// sendonce uses for every POST that creates something (see the API contract,
// section 3, and the IETF httpapi Idempotency-Key draft).
//
// A request's key is scoped (tenant, method, route, key). The first request
// with a scoped key reserves it for a lease; the handler then runs and its
// final response is stored with the key in the same database transaction as
// the handler's own writes. A later request with the same scoped key and the
// same fingerprint (SHA-256 of the RFC 8785 canonical JSON body) replays the
// stored response byte for byte. A request while the first is still running
// gets Outcome InUse (HTTP 409); a request with another body gets Mismatch
// (HTTP 422). A reservation whose lease ran out (its process died) may be
// taken over: since the first request's writes only commit together with its
// stored response, and a completion checks the reservation's token, the
// work can never be committed twice.
//
// Stores implement Reserve, Complete (inside the caller's transaction) and
// Release; Decide holds the rules they share so that every store behaves
// alike.
package idempotency
