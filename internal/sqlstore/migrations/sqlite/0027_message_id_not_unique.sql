-- A send's Message-ID is no longer unique across the database. Generated
-- ones are unique by construction (they hold the send id); a message a
-- client submits keeps its own, and two clients — two tenants even — may
-- give the same one, which a mail server accepts (a global UNIQUE made
-- such a message fail with a transient error on every retry, and let one
-- tenant block another's message). It was also one more random index
-- written on every accept; the one lookup by Message-ID (a provider's
-- report on a send whose provider id never came back) goes through
-- send_providers instead.
--
-- SQLite cannot drop a column's UNIQUE, so the table is rebuilt with the
-- same columns in the same order and its indexes made again. The
-- migration runner turns foreign keys off around it (the documented
-- procedure: DROP TABLE would otherwise delete the sends' children) and
-- checks them before it commits.
CREATE TABLE sends_rebuilt (
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
    message_id      TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,
    attempt_token   TEXT,
    lease_until     INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    sent_at         INTEGER,
    api_key_id      TEXT,
    in_reply_to     TEXT,
    refs            TEXT NOT NULL DEFAULT '[]',
    forward_raw     BLOB,
    tries           INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER,
    scheduled_at    INTEGER,
    attachment_count INTEGER NOT NULL DEFAULT 0,
    raw_message     BLOB,
    stream          TEXT NOT NULL DEFAULT 'transactional'
);
INSERT INTO sends_rebuilt SELECT
    id, tenant, idempotency_key, mailbox_id, status, from_addr, to_addrs, cc_addrs, bcc_addrs, reply_to,
    subject, text_body, html_body, headers, tags, template_id, message_id, attempts, last_error,
    attempt_token, lease_until, created_at, updated_at, sent_at, api_key_id, in_reply_to, refs,
    forward_raw, tries, next_attempt_at, scheduled_at, attachment_count, raw_message, stream
FROM sends;
DROP TABLE sends;
ALTER TABLE sends_rebuilt RENAME TO sends;
CREATE INDEX sends_tenant_idempotency_key ON sends (tenant, idempotency_key);
CREATE INDEX sends_tenant_status_id ON sends (tenant, status, id);
CREATE INDEX sends_tenant_id ON sends (tenant, id);
CREATE INDEX sends_sending_lease ON sends (lease_until) WHERE status = 'sending';
CREATE INDEX sends_api_key_created ON sends (api_key_id, created_at) WHERE api_key_id IS NOT NULL;
CREATE INDEX sends_scheduled ON sends (next_attempt_at) WHERE status = 'scheduled';
CREATE INDEX sends_due_tenant ON sends (tenant, stream, next_attempt_at) WHERE status = 'queued';
CREATE INDEX sends_due ON sends (stream, next_attempt_at) WHERE status = 'queued';
