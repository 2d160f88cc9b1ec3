-- Keys for AI agents and their guardrails (issue 6), and the audit log.
-- allow_recipients: comma-separated lower-case addresses or domains; ''
-- allows any recipient. max_per_hour, max_per_day: 0 is no cap.
-- sends.api_key_id: the key that created the send (set for agent and capped
-- keys), which the caps count and agent keys' lists filter on.

ALTER TABLE api_keys ADD COLUMN agent BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE api_keys ADD COLUMN allow_recipients TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN max_per_hour INTEGER NOT NULL DEFAULT 0;
ALTER TABLE api_keys ADD COLUMN max_per_day INTEGER NOT NULL DEFAULT 0;

ALTER TABLE sends ADD COLUMN api_key_id TEXT;
CREATE INDEX sends_api_key_created ON sends (api_key_id, created_at) WHERE api_key_id IS NOT NULL;

CREATE TABLE audit_log (
    id              TEXT PRIMARY KEY,
    tenant          TEXT NOT NULL,
    api_key_id      TEXT NOT NULL,
    at              BIGINT NOT NULL,
    route           TEXT NOT NULL,
    intent          TEXT NOT NULL DEFAULT '',
    idempotency_key TEXT NOT NULL DEFAULT '',
    status          INTEGER NOT NULL,
    outcome         TEXT NOT NULL,
    code            TEXT NOT NULL DEFAULT '',
    send_id         TEXT NOT NULL DEFAULT '',
    detail          TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_tenant_id ON audit_log (tenant, id);
