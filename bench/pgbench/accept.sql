-- pgbench script: the statements of one sendonce accept on PostgreSQL in
-- its own transaction (one row per accepted send, migration 0040, before
-- batching: advisory lock, the key's record read from the send's row or
-- else from idempotency_keys, the send row holding its completed record),
-- with literal values, run by PostgreSQL alone (no sendonce). Run
-- it on a database sendonce has migrated:
--   pgbench -n -c 32 -j 2 -T 8 -f bench/pgbench/accept.sql DBNAME
-- It measures what PostgreSQL itself can do for this transaction shape;
-- docs/performance.md compares sendonce against it. sendonce now runs a
-- batch of accepts in one transaction (sqlstore/groupcommit.go): one
-- sendonce_lock_idempotency_keys call for all the batch's keys
-- (sqlstore/prelock.go), then one multi-row INSERT per table and COMMIT
-- for the whole batch.
\set n random(1, 1000000000)
BEGIN;
SELECT pg_try_advisory_xact_lock(hashtextextended('default' || E'\n' || 'POST' || E'\n' || '/v1/send' || E'\n' || 'pgb-' || :n || '-' || :client_id, 0));
SELECT idem_fingerprint, 'completed', idem_token, 0, idem_expires_at, idem_status, idem_content_type, idem_body FROM sends WHERE tenant = 'default' AND idem_key = 'pgb-' || :n || '-' || :client_id AND idem_method = 'POST' AND idem_route = '/v1/send';
SELECT fingerprint, state, token, locked_until, expires_at, status, content_type, body FROM idempotency_keys WHERE tenant = 'default' AND method = 'POST' AND route = '/v1/send' AND key = 'pgb-' || :n || '-' || :client_id FOR UPDATE;
INSERT INTO sends (id, tenant, idempotency_key, mailbox_id, status, from_addr, to_addrs, cc_addrs, bcc_addrs, reply_to, subject, text_body, html_body, headers, tags, template_id, message_id, attempts, last_error, attempt_token, lease_until, created_at, updated_at, sent_at, in_reply_to, refs, forward_raw, tries, next_attempt_at, idem_method, idem_route, idem_key, idem_fingerprint, idem_token, idem_status, idem_content_type, idem_body, idem_expires_at) VALUES ('snd_pgb' || :n || '_' || :client_id, 'default', 'pgb-' || :n || '-' || :client_id, 'default', 'queued', 'a@b', '["x@y"]', '[]', '[]', '[]', 'Load test', 'Hello', '', '[]', '{}', NULL, '<m' || :n || '_' || :client_id || '@x>', 0, NULL, NULL, NULL, 1, 1, NULL, NULL, '[]', '', 0, 1, 'POST', '/v1/send', 'pgb-' || :n || '-' || :client_id, 'fp', 'tok', 200, 'application/json', '\x7b7d', 2);
COMMIT;
