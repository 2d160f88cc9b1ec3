-- From this migration on, a restricted API key's Idempotency-Keys are
-- stored under a form named by the key's limits (agent or not, its
-- mailboxes), not by the key itself, so that a rotated key with the same
-- limits replays its predecessor's requests (docs/api.md, Idempotency).
-- Nothing in the schema changes: the time this migration is recorded as
-- applied (sendonce_migrations) starts one idempotency TTL in which a
-- retry is also looked up under the forms older versions stored — the
-- plain key and the per-API-key form — so that a request accepted before
-- the upgrade replays instead of being sent again.
SELECT 1;
