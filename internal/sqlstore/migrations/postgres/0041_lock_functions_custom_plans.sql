-- The lock-and-read functions plan their lookups on every call.
--
-- PL/pgSQL caches each statement's plan for the session, and after five
-- calls it may keep a generic plan for good. A session whose first calls
-- came while `sends` was new (empty, or not yet analyzed) kept a plan that
-- reads a tenant's sends through sends_tenant_id and filters on the key:
-- its cost looked the same as sends_idem's then. Each later call walked
-- every send of the tenant, 0.3 to 1 s on 20,000 sends (measured with
-- auto_explain), and every accept of the batches on that connection
-- waited for it. A plan made per call sees the table's current size and
-- statistics and takes sends_idem; planning two one-row lookups costs
-- microseconds.
ALTER FUNCTION sendonce_lock_idempotency_key(TEXT, TEXT, TEXT, TEXT, TEXT) SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION sendonce_lock_idempotency_keys(TEXT[], TEXT[], TEXT[], TEXT[], TEXT[]) SET plan_cache_mode = force_custom_plan;
