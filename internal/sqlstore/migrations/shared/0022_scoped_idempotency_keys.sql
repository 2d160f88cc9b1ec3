-- From this migration on, a restricted API key's Idempotency-Keys are
-- stored under a form that names the key, and keys derived from an SMTP
-- Message-ID under a "msgid " form. Nothing in the schema changes: the
-- time this migration is recorded as applied (sendonce_migrations) is when
-- the database began storing those forms, and for one idempotency TTL
-- after it a retry is also looked up under the older, unscoped form, so
-- that a message accepted before the upgrade replays instead of being sent
-- again.
SELECT 1;
