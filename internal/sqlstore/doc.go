// Package sqlstore keeps sendonce's state in SQLite (through the pure-Go
// modernc.org/sqlite driver) or PostgreSQL (through pgx). It implements
// core.Store, and its transactions core.Tx, on both; the migrations of
// each live under migrations/.
//
// SQLite allows one writer at a time. Rather than let concurrent writers
// collide and retry on SQLITE_BUSY, the store funnels every write through a
// pool of exactly one connection (River's SQLite driver asks for the same),
// shared by many callers' transactions at once (group commit: one fsync per
// batch), and serves reads from a separate pool of read-only connections,
// which WAL mode lets run beside the writer. On PostgreSQL transactions run
// on a pgx pool; an idempotency key is held by a transaction-scoped
// advisory lock (see docs/design.md).
package sqlstore
