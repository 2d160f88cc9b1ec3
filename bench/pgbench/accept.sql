-- pgbench script: the statements of one sendonce accept on PostgreSQL, with
-- literal values, run by PostgreSQL alone (no sendonce). Run it on a
-- database sendonce has migrated:
--   pgbench -n -c 32 -j 2 -T 8 -f bench/pgbench/accept.sql DBNAME
-- It measures what PostgreSQL itself can do for this transaction shape;
-- docs/performance.md compares sendonce against it.
\set n random(1, 1000000000)
BEGIN;
INSERT INTO idempotency_keys (tenant, method, route, key, fingerprint, state, token, locked_until, created_at) VALUES ('default', 'POST', '/v1/send', 'pgb-' || :n || '-' || :client_id, 'fp', 'in_flight', 'tok', 1, 1) ON CONFLICT (tenant, method, route, key) DO NOTHING;
INSERT INTO sends (id, tenant, idempotency_key, mailbox_id, status, from_addr, to_addrs, cc_addrs, bcc_addrs, reply_to, subject, text_body, html_body, headers, tags, message_id, created_at, updated_at) VALUES ('snd_pgb' || :n || '_' || :client_id, 'default', 'pgb-' || :n || '-' || :client_id, 'default', 'queued', 'a@b', '["x@y"]', '[]', '[]', '[]', 'Load test', 'Hello', '', '[]', '{}', '<m' || :n || '_' || :client_id || '@x>', 1, 1);
INSERT INTO send_events (send_id, type, at, detail) VALUES ('snd_pgb' || :n || '_' || :client_id, 'accepted', 1, 'queued');
INSERT INTO river_job (args, kind, max_attempts, queue, state, finalized_at) VALUES ('{"send_id":"x"}', 'pgbench', 8, 'pgbench', 'completed', now());
UPDATE idempotency_keys SET state = 'completed', status = 200, content_type = 'application/json', body = '\x7b7d', completed_at = 1, expires_at = 2 WHERE tenant = 'default' AND method = 'POST' AND route = '/v1/send' AND key = 'pgb-' || :n || '-' || :client_id AND token = 'tok' AND state = 'in_flight';
COMMIT;
