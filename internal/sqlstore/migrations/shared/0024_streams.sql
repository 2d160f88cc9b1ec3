-- Streams (docs/api.md, "Streams"): every send is transactional or bulk,
-- and an API key may give its sends a default stream.
ALTER TABLE sends ADD COLUMN stream TEXT NOT NULL DEFAULT 'transactional';
ALTER TABLE api_keys ADD COLUMN default_stream TEXT NOT NULL DEFAULT '';
-- ClaimDue serves a tenant's transactional sends before its bulk ones:
-- the stream joins the due indexes after the tenant, so each (tenant,
-- stream) pair's oldest due sends are still one seek, and the tenants are
-- still found by skipping through the index's first column.
DROP INDEX sends_due_tenant;
CREATE INDEX sends_due_tenant ON sends (tenant, stream, next_attempt_at) WHERE status = 'queued';
DROP INDEX sends_due;
CREATE INDEX sends_due ON sends (stream, next_attempt_at) WHERE status = 'queued';
