-- Times are INTEGER microseconds since the Unix epoch, UTC.

CREATE TABLE api_keys (
    id                TEXT PRIMARY KEY,
    tenant            TEXT NOT NULL,
    name              TEXT NOT NULL,
    secret_hash       BLOB NOT NULL,
    scopes            TEXT NOT NULL,
    mailboxes         TEXT NOT NULL DEFAULT '',
    requires_approval INTEGER NOT NULL DEFAULT 0,
    created_at        INTEGER NOT NULL,
    revoked_at        INTEGER
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
    locked_until INTEGER NOT NULL,
    status       INTEGER,
    content_type TEXT,
    body         BLOB,
    created_at   INTEGER NOT NULL,
    completed_at INTEGER,
    expires_at   INTEGER,
    PRIMARY KEY (tenant, method, route, key)
) WITHOUT ROWID;
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
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,
    attempt_token   TEXT,
    lease_until     INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    sent_at         INTEGER
);
CREATE INDEX sends_tenant_idempotency_key ON sends (tenant, idempotency_key);
CREATE INDEX sends_tenant_status_id ON sends (tenant, status, id);
CREATE INDEX sends_tenant_id ON sends (tenant, id);
CREATE INDEX sends_sending_lease ON sends (lease_until) WHERE status = 'sending';

CREATE TABLE send_events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    send_id TEXT NOT NULL REFERENCES sends (id) ON DELETE CASCADE,
    type    TEXT NOT NULL,
    at      INTEGER NOT NULL,
    detail  TEXT NOT NULL
);
CREATE INDEX send_events_send_id ON send_events (send_id, id);

CREATE TABLE templates (
    tenant     TEXT NOT NULL,
    id         TEXT NOT NULL,
    subject    TEXT NOT NULL,
    text_body  TEXT NOT NULL,
    html_body  TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, id)
);

CREATE TABLE mailboxes (
    tenant       TEXT NOT NULL,
    id           TEXT NOT NULL,
    address      TEXT NOT NULL,
    name         TEXT NOT NULL,
    transport    TEXT NOT NULL,
    receive_only INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
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
    raw         BLOB NOT NULL,
    received_at INTEGER NOT NULL
);
CREATE INDEX inbox_messages_tenant_id ON inbox_messages (tenant, id);

CREATE TABLE suppressions (
    tenant     TEXT NOT NULL,
    address    TEXT NOT NULL,
    reason     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, address)
);
