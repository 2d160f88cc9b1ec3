-- One round trip for DecideIdempotency on PostgreSQL (issue 13, batching):
-- take the scoped key's transaction-scoped advisory lock and, when got,
-- read and row-lock the key's record. A function, not one plain statement:
-- a statement reads as of its start, before its lock was taken, and would
-- miss the record of a holder that committed (and let the lock go) in
-- between; a VOLATILE function's queries each read as of their own start.
-- lock_text is the text whose hash names the lock (tenant, method, route
-- and key joined by newlines, as sendonce has always hashed it).
CREATE FUNCTION sendonce_lock_idempotency_key(lock_text TEXT, p_tenant TEXT, p_method TEXT, p_route TEXT, p_key TEXT,
    OUT got BOOLEAN, OUT fingerprint TEXT, OUT state TEXT, OUT token TEXT, OUT locked_until BIGINT,
    OUT expires_at BIGINT, OUT status BIGINT, OUT content_type TEXT, OUT body BYTEA)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    got := pg_try_advisory_xact_lock(hashtextextended(lock_text, 0));
    IF got THEN
        SELECT k.fingerprint, k.state, k.token, k.locked_until, k.expires_at, k.status, k.content_type, k.body
          INTO fingerprint, state, token, locked_until, expires_at, status, content_type, body
          FROM idempotency_keys k
         WHERE k.tenant = p_tenant AND k.method = p_method AND k.route = p_route AND k.key = p_key
           FOR UPDATE;
    END IF;
END
$$;
