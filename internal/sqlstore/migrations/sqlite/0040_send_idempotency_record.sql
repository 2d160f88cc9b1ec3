-- One row per accepted send: the idempotency record of the request that
-- made a send (its scope, fingerprint and stored answer) lives in the
-- send's own row, under one unique index, instead of in a row of
-- idempotency_keys under a second random key index (docs/performance-journal.md,
-- "one row per accepted send"). idempotency_keys stays for what has no
-- send: stored refusals, reservations, the answers of other routes, and
-- every record written before this migration, which replays from there
-- until it expires (the decide step reads both).
--
-- idem_key is the key as stored (its scope's form); idempotency_key stays
-- the key as the caller gave it, for GET /v1/sends?idempotency_key=.
-- Expiry sets the idem_ columns to NULL and keeps the send.
ALTER TABLE sends ADD COLUMN idem_method TEXT;
ALTER TABLE sends ADD COLUMN idem_route TEXT;
ALTER TABLE sends ADD COLUMN idem_key TEXT;
ALTER TABLE sends ADD COLUMN idem_fingerprint TEXT;
ALTER TABLE sends ADD COLUMN idem_token TEXT;
ALTER TABLE sends ADD COLUMN idem_status INTEGER;
ALTER TABLE sends ADD COLUMN idem_content_type TEXT;
ALTER TABLE sends ADD COLUMN idem_body BLOB;
ALTER TABLE sends ADD COLUMN idem_expires_at BIGINT;

-- The one key index a send with a live record is in: the decide step's
-- lookup, and the final guard that two requests never hold one key.
CREATE UNIQUE INDEX sends_idem ON sends (tenant, idem_key, idem_method, idem_route) WHERE idem_key IS NOT NULL;
-- The lookup by the caller's key reads sends_idem for a send whose stored
-- key is the caller's own (the common case: one index entry per accept)
-- and this index for every other send with a key: one stored under
-- another form (a restricted API key's namespace, SMTP's Message-ID
-- form), one whose record expired, and every send made before this
-- migration. A send is in one of the two, never both.
CREATE INDEX sends_caller_key ON sends (tenant, idempotency_key) WHERE idem_key IS DISTINCT FROM idempotency_key;
DROP INDEX sends_tenant_idempotency_key;
-- Expiry's scan; the times only grow, so inserts append at the right edge.
CREATE INDEX sends_idem_expires ON sends (idem_expires_at) WHERE idem_expires_at IS NOT NULL;
