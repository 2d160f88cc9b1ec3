-- Times are BIGINT microseconds since the Unix epoch, UTC (as in SQLite, so
-- one store implementation serves both).

CREATE TABLE api_keys (
    id                TEXT PRIMARY KEY,
    tenant            TEXT NOT NULL,
    name              TEXT NOT NULL,
    secret_hash       BYTEA NOT NULL,
    scopes            TEXT NOT NULL,
    mailboxes         TEXT NOT NULL DEFAULT '',
    requires_approval BOOLEAN NOT NULL DEFAULT FALSE,
    created_at        BIGINT NOT NULL,
    revoked_at        BIGINT
);

-- One row per scoped Idempotency-Key. The primary key is the final guard:
-- two requests can never both hold one scoped key.
CREATE TABLE idempotency_keys (
    tenant       TEXT NOT NULL,
    method       TEXT NOT NULL,
    route        TEXT NOT NULL,
    key          TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('in_flight', 'completed')),
    token        TEXT NOT NULL,
    locked_until BIGINT NOT NULL,
    status       BIGINT,
    content_type TEXT,
    body         BYTEA,
    created_at   BIGINT NOT NULL,
    completed_at BIGINT,
    expires_at   BIGINT,
    PRIMARY KEY (tenant, method, route, key)
);
CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);

CREATE TABLE sends (
    id              TEXT PRIMARY KEY,
    tenant          TEXT NOT NULL,
    idempotency_key TEXT,
    mailbox_id      TEXT NOT NULL,
    status          TEXT NOT NULL,
    from_addr       TEXT NOT NULL,
    to_addrs        TEXT NOT NULL,
    cc_addrs        TEXT NOT NULL,
    bcc_addrs       TEXT NOT NULL,
    reply_to        TEXT NOT NULL,
    subject         TEXT NOT NULL,
    text_body       TEXT NOT NULL,
    html_body       TEXT NOT NULL,
    headers         TEXT NOT NULL,
    tags            TEXT NOT NULL,
    template_id     TEXT,
    message_id      TEXT NOT NULL UNIQUE,
    attempts        BIGINT NOT NULL DEFAULT 0,
    last_error      TEXT,
    attempt_token   TEXT,
    lease_until     BIGINT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    sent_at         BIGINT
);
CREATE INDEX sends_tenant_idempotency_key ON sends (tenant, idempotency_key);
CREATE INDEX sends_tenant_status_id ON sends (tenant, status, id);
CREATE INDEX sends_tenant_id ON sends (tenant, id);
CREATE INDEX sends_sending_lease ON sends (lease_until) WHERE status = 'sending';

CREATE TABLE send_events (
    id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    send_id TEXT NOT NULL REFERENCES sends (id) ON DELETE CASCADE,
    type    TEXT NOT NULL,
    at      BIGINT NOT NULL,
    detail  TEXT NOT NULL
);
CREATE INDEX send_events_send_id ON send_events (send_id, id);

CREATE TABLE templates (
    tenant     TEXT NOT NULL,
    id         TEXT NOT NULL,
    subject    TEXT NOT NULL,
    text_body  TEXT NOT NULL,
    html_body  TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (tenant, id)
);

CREATE TABLE mailboxes (
    tenant       TEXT NOT NULL,
    id           TEXT NOT NULL,
    address      TEXT NOT NULL,
    name         TEXT NOT NULL,
    transport    TEXT NOT NULL,
    receive_only BOOLEAN NOT NULL DEFAULT FALSE,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (tenant, id)
);

CREATE TABLE inbox_messages (
    id          TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    send_id     TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    mail_from   TEXT NOT NULL,
    rcpt_to     TEXT NOT NULL,
    subject     TEXT NOT NULL,
    raw         BYTEA NOT NULL,
    received_at BIGINT NOT NULL
);
CREATE INDEX inbox_messages_tenant_id ON inbox_messages (tenant, id);

CREATE TABLE suppressions (
    tenant     TEXT NOT NULL,
    address    TEXT NOT NULL,
    reason     TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (tenant, address)
);
