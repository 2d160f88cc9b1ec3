-- idempotency_keys becomes a rowid table. As a WITHOUT ROWID table its
-- records, response bodies included, lived in the leaves of the key's
-- B-tree: every accept inserted a ~0.5 KB record at a random place, so
-- each one dirtied a leaf of its own and split leaves often (a split
-- rewrites three pages). Measured by the pages in the WAL of a load run
-- (docs/performance.md), that table was over half of every commit's pages,
-- about three per accept. Now the records are appended in rowid order and
-- only the narrow unique index on the scoped key takes a random insert.
-- The primary key stays the final guard: two requests can never both hold
-- one scoped key.
CREATE TABLE idempotency_keys_rowid (
    tenant       TEXT NOT NULL,
    method       TEXT NOT NULL,
    route        TEXT NOT NULL,
    key          TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('in_flight', 'completed')),
    token        TEXT NOT NULL,
    locked_until INTEGER NOT NULL,
    status       INTEGER,
    content_type TEXT,
    body         BLOB,
    created_at   INTEGER NOT NULL,
    completed_at INTEGER,
    expires_at   INTEGER,
    PRIMARY KEY (tenant, method, route, key)
);
INSERT INTO idempotency_keys_rowid
    (tenant, method, route, key, fingerprint, state, token, locked_until, status, content_type, body,
     created_at, completed_at, expires_at)
SELECT tenant, method, route, key, fingerprint, state, token, locked_until, status, content_type, body,
       created_at, completed_at, expires_at
FROM idempotency_keys; -- in key order: a scan, no sort of the whole table
DROP TABLE idempotency_keys;
ALTER TABLE idempotency_keys_rowid RENAME TO idempotency_keys;
CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);
