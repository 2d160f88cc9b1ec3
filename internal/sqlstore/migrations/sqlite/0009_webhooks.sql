-- Signed webhooks (issue 16). A webhook is a tenant's endpoint; events
-- holds the "email.…" types it subscribed to (JSON array); secret is the
-- signing secret as stored: sealed under SENDONCE_SECRET_KEY, or the
-- whsec_ text when none is set (docs/security.md says why it cannot be a
-- hash). failures counts its consecutive failed deliveries (reset by a
-- success); at webhook.MaxConsecutiveFailures the endpoint is disabled.
CREATE TABLE webhooks (
    id              TEXT PRIMARY KEY,
    tenant          TEXT NOT NULL,
    endpoint        TEXT NOT NULL,
    events          TEXT NOT NULL,
    status          TEXT NOT NULL,
    secret          BLOB NOT NULL,
    failures        INTEGER NOT NULL DEFAULT 0,
    disabled_reason TEXT NOT NULL DEFAULT '',
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);
CREATE INDEX webhooks_tenant_id ON webhooks (tenant, id);

-- One row per (enabled webhook, history event name it wants): what
-- AddEvent joins to queue deliveries in the event's own transaction. A
-- disabled webhook has none, so a tenant without enabled webhooks costs
-- AddEvent one empty index lookup.
CREATE TABLE webhook_subscriptions (
    tenant     TEXT NOT NULL,
    event      TEXT NOT NULL,
    webhook_id TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    PRIMARY KEY (tenant, event, webhook_id)
);

-- One row per event to one endpoint: its own job, like a send row.
-- event_id is the event's uid, which is also the webhook-id header (the
-- same on every retry). body is built once, at the first claim, and sent
-- as it is on every retry. status: pending (due at next_attempt_at),
-- attempting (claimed under lease_token until lease_until), success,
-- failed.
CREATE TABLE webhook_deliveries (
    webhook_id      TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id        TEXT NOT NULL,
    tenant          TEXT NOT NULL,
    send_id         TEXT NOT NULL,
    event           TEXT NOT NULL,
    status          TEXT NOT NULL,
    tries           INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT,
    lease_token     TEXT NOT NULL DEFAULT '',
    lease_until     BIGINT,
    body            BLOB,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    PRIMARY KEY (webhook_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_attempting ON webhook_deliveries (webhook_id, lease_until) WHERE status = 'attempting';

-- Every HTTP attempt of a delivery, for GET …/events/{event_id}/attempts.
CREATE TABLE webhook_attempts (
    id          TEXT PRIMARY KEY,
    webhook_id  TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    at          BIGINT NOT NULL,
    http_status INTEGER NOT NULL,
    response    TEXT NOT NULL,
    error       TEXT NOT NULL,
    duration_us BIGINT NOT NULL,
    FOREIGN KEY (webhook_id, event_id) REFERENCES webhook_deliveries (webhook_id, event_id) ON DELETE CASCADE
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (webhook_id, event_id, id);
