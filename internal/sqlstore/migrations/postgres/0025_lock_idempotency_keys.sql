-- The keys of a whole batch decided in one round trip on PostgreSQL: for
-- each (in the order given, which the caller sorts), take the key's
-- transaction-scoped advisory lock as sendonce_lock_idempotency_key does
-- and, when got, read and row-lock its record. A batch of accepts made one
-- call of that function each, a round trip and a statement apiece, before
-- the batch's multi-row inserts; the group commit now locks the batch's
-- keys in one call before it runs the batch's transactions
-- (internal/sqlstore/prelock.go). Each row carries the key's position
-- (n, from 1) in the arrays.
CREATE FUNCTION sendonce_lock_idempotency_keys(lock_texts TEXT[], p_tenants TEXT[], p_methods TEXT[], p_routes TEXT[], p_keys TEXT[])
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
            SELECT k.fingerprint, k.state, k.token, k.locked_until, k.expires_at, k.status, k.content_type, k.body
              INTO fingerprint, state, token, locked_until, expires_at, status, content_type, body
              FROM idempotency_keys k
             WHERE k.tenant = p_tenants[i] AND k.method = p_methods[i] AND k.route = p_routes[i] AND k.key = p_keys[i]
               FOR UPDATE;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
