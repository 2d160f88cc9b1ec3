// Package delivery hands accepted sends to the next hop and keeps the
// attempt state machine of docs/guarantees.md, section 2:
//
//	queued ──attempt──▶ sending ──250──▶ sent
//	                       │ 4xx / failure before DATA ──▶ queued (retry with backoff) … ▶ failed
//	                       │ 5xx ──────────────────────────▶ failed
//	                       └ broken after DATA began, or the worker died ──▶ unknown
//
// "sending" is committed before the transport is called, so a worker that
// dies mid-attempt leaves a trace that the rescuer turns into unknown.
// unknown is never retried by itself: only reconcile leaves it.
//
// A queued send's row is its own delivery job, written in the transaction
// that accepts the send: workers claim due rows with a lease. River
// (github.com/riverqueue/river) runs only the periodic housekeeping (the
// rescue of lapsed attempts, the purges).
package delivery
