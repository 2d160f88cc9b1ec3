// Package client is the Go client of the sendonce native API (/v1).
//
// Half of "never sends twice" is the caller's job: make the Idempotency-Key
// once per logical email, store it before the first call, and reuse the
// same key and the same body on every retry, after every restart. This
// client does its half:
//
//   - Every call is retried, boundedly (Config.MaxAttempts and
//     Config.MaxElapsed), with exponential backoff and full jitter, and
//     honours Retry-After. It retries transport errors, timeouts, 409
//     idempotency_key_in_use, 429 and 5xx; never any other 4xx, which is the
//     server's final answer.
//   - Every attempt of one call carries the SAME Idempotency-Key. When the
//     caller gives none, the client makes one (a UUID v4) per logical call,
//     never per attempt, and reports it on the result and on the error
//     ([IdempotencyKeyOf]).
//   - Errors from the API are values: [*Error] with the HTTP status and the
//     API's code, message and param, found with errors.As.
//
// A call that failed with an error for which [IsOutcomeUnknown] is true may
// or may not have created the send. Do not make a new key and send again:
// look the key up with [Client.SendByKey] (the server keeps a send's key for
// as long as it keeps the send), or retry with the same key and body while
// the server's --idempotency-ttl (24h by default) has not passed since the
// first attempt.
//
// For work that must survive process restarts, package
// github.com/sendonce/sendonce/outbox stores the key and the frozen body in
// the application's own database and drives this client.
package client
