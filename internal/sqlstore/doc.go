// Package sqlstore keeps sendonce's state in SQLite (through the pure-Go
// modernc.org/sqlite driver) or PostgreSQL (through pgx). One
// implementation serves both: it implements core.Store, and its
// transactions core.Tx, with the same SQL written with ? placeholders,
// which the PostgreSQL side rebinds (db.go); where the SQL differs (row
// locks, SKIP LOCKED) a field of Store holds the dialect's fragment. The
// migrations of each live under migrations/sqlite and migrations/postgres,
// and those whose text both share once under migrations/shared
// (migrations.go).
//
// SQLite allows one writer at a time. Rather than let concurrent writers
// collide and retry on SQLITE_BUSY, the store funnels every write through a
// pool of exactly one connection (River's SQLite driver asks for the same),
// shared by many callers' transactions at once (group commit: one fsync per
// batch), and serves reads from a separate pool of read-only connections,
// which WAL mode lets run beside the writer. On PostgreSQL transactions run
// on a pgx pool; an idempotency key is held by a transaction-scoped
// advisory lock (see docs/design.md).
//
// Where things live, by the aggregate of internal/core/store.go they
// implement:
//
//   - sends.go: a send's write path (InsertSend with its tags and files,
//     UpdateSend, Reschedule, AddEvent); sends_read.go: Send, ListSends,
//     SendWithEvents, SendAttachments; queue.go: ClaimDue, UpdateAttempt,
//     ExpiredAttempts, QueueDepth; events.go: event ids and bounce
//     encoding.
//   - drafts.go (Drafts, DraftsTx: content updated and marked sent only
//     against the version read).
//   - apikeys.go (Keys, KeysTx), templates.go, mailboxes.go, domains.go,
//     inbox.go (the capture inbox), audit.go, caps.go (CountCapped),
//     secrets.go (ServerSecret).
//   - suppressions.go; bounces.go: recipient states, inbound reports and
//     unmatched mail; dmarc.go: DMARC aggregate reports and the inboxes
//     that take them.
//   - reputation.go (Reputation, ReputationTx): the reputation guard's
//     stream states and outcomes; queue.go's claim leaves a paused
//     stream's sends out.
//   - idempotency.go: the durable Idempotency-Key tier (TxRecords, the
//     completed-key read and the purge).
//   - sendrecord.go: an accepted send's idempotency record in the send's
//     own row (one row per accepted send, migration 0040).
//   - webhooks.go (webhooks and their deliveries, read and changed) and
//     webhook_queue.go (claiming and recording deliveries).
//   - retention.go: the purges of sends and audit entries.
//   - sessions.go and stats.go: the dashboard's sessions and counts.
//
// And the machinery: store.go (Store, Tx, InTx), db.go (the querier over
// database/sql and pgx), sqlite.go and stmtconn.go (opening SQLite, with
// prepared statements kept per connection), postgres.go, groupcommit.go,
// deferred.go and pgbatch.go (the batched write path), unavailable.go (a
// lost database as core's unavailable error).
package sqlstore
