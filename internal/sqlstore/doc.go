// Package sqlstore keeps sendonce's state in SQLite through the pure-Go
// modernc.org/sqlite driver. It implements core.Store.
//
// SQLite allows one writer at a time. Rather than let concurrent writers
// collide and retry on SQLITE_BUSY, the store funnels every write through a
// pool of exactly one connection (River's SQLite driver asks for the same),
// and serves reads from a separate pool of read-only connections, which WAL
// mode lets run beside the writer.
package sqlstore
