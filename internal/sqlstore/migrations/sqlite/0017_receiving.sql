-- Receiving (docs/receiving.md): addresses that take mail, the messages
-- received, their raw bytes once per tenant, and threads.

-- An address (or a whole domain's catch-all) that receives, server-wide:
-- the inbound listener answers RCPT from this table alone, so an address
-- belongs to one tenant's mailbox. domain rows have address '@domain'.
CREATE TABLE receiving_addresses (
    address    TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL,
    mailbox_id TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX receiving_addresses_mailbox ON receiving_addresses (tenant, mailbox_id);

-- The raw message once per tenant, by its SHA-256: a message to three
-- mailboxes of one tenant is stored once.
CREATE TABLE received_raw (
    tenant     TEXT NOT NULL,
    digest     TEXT NOT NULL,
    raw        BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, digest)
);

-- One row per message per mailbox. dedup_key is a digest of the mailbox,
-- the Message-ID, the envelope and the content: the same message delivered
-- again (a sender that lost our 250) finds its first copy here.
CREATE TABLE received_messages (
    id           TEXT PRIMARY KEY,
    tenant       TEXT NOT NULL,
    mailbox_id   TEXT NOT NULL,
    thread_id    TEXT NOT NULL,
    dedup_key    TEXT NOT NULL,
    digest       TEXT NOT NULL,
    source       TEXT NOT NULL,
    mail_from    TEXT NOT NULL,
    rcpt_to      TEXT NOT NULL,
    remote_ip    TEXT NOT NULL,
    message_id   TEXT NOT NULL,
    in_reply_to  TEXT NOT NULL,
    refs         TEXT NOT NULL,
    from_addr    TEXT NOT NULL,
    to_addrs     TEXT NOT NULL,
    cc_addrs     TEXT NOT NULL,
    reply_to     TEXT NOT NULL,
    subject      TEXT NOT NULL,
    sent_date    INTEGER,
    text_body    TEXT NOT NULL,
    html_body    TEXT NOT NULL,
    headers      TEXT NOT NULL,
    attachments  TEXT NOT NULL,
    auth         TEXT NOT NULL,
    size         INTEGER NOT NULL,
    is_read      INTEGER NOT NULL DEFAULT 0,
    send_id      TEXT NOT NULL,
    received_at  INTEGER NOT NULL
);
CREATE UNIQUE INDEX received_messages_dedup ON received_messages (tenant, dedup_key);
CREATE INDEX received_messages_mailbox ON received_messages (tenant, mailbox_id, id);
CREATE INDEX received_messages_thread ON received_messages (thread_id);
-- For the purge: raw bytes no message names any more.
CREATE INDEX received_messages_digest ON received_messages (tenant, digest);

-- A conversation in one mailbox.
CREATE TABLE threads (
    id          TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    mailbox_id  TEXT NOT NULL,
    subject     TEXT NOT NULL,
    subject_key TEXT NOT NULL,
    folder      TEXT NOT NULL DEFAULT 'inbox',
    labels      TEXT NOT NULL DEFAULT '[]',
    last_at     INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX threads_mailbox ON threads (tenant, mailbox_id, last_at);
CREATE INDEX threads_subject ON threads (tenant, mailbox_id, subject_key);

-- Each message of a thread, received or sent, by its Message-ID: the
-- In-Reply-To and References of the next message find the thread here.
CREATE TABLE thread_messages (
    tenant     TEXT NOT NULL,
    thread_id  TEXT NOT NULL,
    message_id TEXT NOT NULL,
    kind       TEXT NOT NULL,
    ref_id     TEXT NOT NULL,
    at         INTEGER NOT NULL,
    PRIMARY KEY (thread_id, kind, ref_id)
);
CREATE INDEX thread_messages_message_id ON thread_messages (tenant, message_id);

-- The unmatched inbound mail keeps the start of a message and its size
-- (0 for items kept whole before this migration).
ALTER TABLE inbound_unmatched ADD COLUMN size BIGINT NOT NULL DEFAULT 0;
