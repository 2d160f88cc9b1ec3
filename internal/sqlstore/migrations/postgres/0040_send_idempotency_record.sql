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
ALTER TABLE sends ADD COLUMN idem_body BYTEA;
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

-- The decide step's lock-and-read functions read the send's row first,
-- then idempotency_keys. The send's row is not locked: the key's advisory
-- lock is what excludes a second request, and each query of a VOLATILE
-- function reads as of its own start, after the lock was taken.
CREATE OR REPLACE FUNCTION sendonce_lock_idempotency_key(lock_text TEXT, p_tenant TEXT, p_method TEXT, p_route TEXT, p_key TEXT,
    OUT got BOOLEAN, OUT fingerprint TEXT, OUT state TEXT, OUT token TEXT, OUT locked_until BIGINT,
    OUT expires_at BIGINT, OUT status BIGINT, OUT content_type TEXT, OUT body BYTEA)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    got := pg_try_advisory_xact_lock(hashtextextended(lock_text, 0));
    IF got THEN
        SELECT s.idem_fingerprint, 'completed', s.idem_token, 0::BIGINT, s.idem_expires_at, s.idem_status::BIGINT, s.idem_content_type, s.idem_body
          INTO fingerprint, state, token, locked_until, expires_at, status, content_type, body
          FROM sends s
         WHERE s.tenant = p_tenant AND s.idem_key = p_key AND s.idem_method = p_method AND s.idem_route = p_route;
        IF NOT FOUND THEN
            SELECT k.fingerprint, k.state, k.token, k.locked_until, k.expires_at, k.status, k.content_type, k.body
              INTO fingerprint, state, token, locked_until, expires_at, status, content_type, body
              FROM idempotency_keys k
             WHERE k.tenant = p_tenant AND k.method = p_method AND k.route = p_route AND k.key = p_key
               FOR UPDATE;
        END IF;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION sendonce_lock_idempotency_keys(lock_texts TEXT[], p_tenants TEXT[], p_methods TEXT[], p_routes TEXT[], p_keys TEXT[])
RETURNS TABLE (n INT, got BOOLEAN, fingerprint TEXT, state TEXT, token TEXT, locked_until BIGINT,
    expires_at BIGINT, status BIGINT, content_type TEXT, body BYTEA)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    i INT;
BEGIN
    FOR i IN 1 .. coalesce(array_length(lock_texts, 1), 0) LOOP
        n := i;
        got := pg_try_advisory_xact_lock(hashtextextended(lock_texts[i], 0));
        fingerprint := NULL; state := NULL; token := NULL; locked_until := NULL;
        expires_at := NULL; status := NULL; content_type := NULL; body := NULL;
        IF got THEN
            SELECT s.idem_fingerprint, 'completed', s.idem_token, 0::BIGINT, s.idem_expires_at, s.idem_status::BIGINT, s.idem_content_type, s.idem_body
              INTO fingerprint, state, token, locked_until, expires_at, status, content_type, body
              FROM sends s
             WHERE s.tenant = p_tenants[i] AND s.idem_key = p_keys[i] AND s.idem_method = p_methods[i] AND s.idem_route = p_routes[i];
            IF NOT FOUND THEN
                SELECT k.fingerprint, k.state, k.token, k.locked_until, k.expires_at, k.status, k.content_type, k.body
                  INTO fingerprint, state, token, locked_until, expires_at, status, content_type, body
                  FROM idempotency_keys k
                 WHERE k.tenant = p_tenants[i] AND k.method = p_methods[i] AND k.route = p_routes[i] AND k.key = p_keys[i]
                   FOR UPDATE;
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
