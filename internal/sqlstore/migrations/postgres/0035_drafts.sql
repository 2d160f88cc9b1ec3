-- Drafts (docs/agents.md, "Drafts"): a message kept unsent until someone
-- sends it. content is the send's fields (JSON, as app encodes them);
-- version counts edits, so that a send records itself only against the
-- content it read; idempotency_key is fixed at creation and is the key the
-- draft is sent under; send_id is set in the send's own transaction.
CREATE TABLE drafts (
    id              TEXT PRIMARY KEY,
    tenant          TEXT NOT NULL,
    mailbox_id      TEXT NOT NULL DEFAULT '',
    reply_to_id     TEXT NOT NULL DEFAULT '',
    thread_id       TEXT NOT NULL DEFAULT '',
    content         TEXT NOT NULL,
    version         INTEGER NOT NULL,
    idempotency_key TEXT NOT NULL,
    send_id         TEXT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    sent_at         BIGINT
);
CREATE INDEX drafts_tenant ON drafts (tenant, id);
