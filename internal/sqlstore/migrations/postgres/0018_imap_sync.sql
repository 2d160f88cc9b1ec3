-- Connected mailboxes (docs/mailboxes.md). A mailbox's imap URL is kept
-- as stored by app: sealed under SENDONCE_SECRET_KEY when one is set
-- (its password is in it). NULL: the mailbox is not connected.
-- imap_shown is the same URL without its password: what views show.
ALTER TABLE mailboxes ADD COLUMN imap_shown TEXT NOT NULL DEFAULT '';
ALTER TABLE mailboxes ADD COLUMN imap BYTEA;

-- One row per connected mailbox: who syncs it (the lease: one process at
-- a time, holder until lease_until), where its INBOX sync stands
-- (uid_validity, last_uid: every message up to it was handed to
-- receiving), and why it is paused (a class, never the server's text).
CREATE TABLE imap_sync (
    tenant        TEXT NOT NULL,
    mailbox_id    TEXT NOT NULL,
    holder        TEXT NOT NULL DEFAULT '',
    lease_until   BIGINT NOT NULL DEFAULT 0,
    uid_validity  BIGINT NOT NULL DEFAULT 0,
    last_uid      BIGINT NOT NULL DEFAULT 0,
    status        TEXT NOT NULL DEFAULT 'syncing',
    error_class   TEXT NOT NULL DEFAULT '',
    failures      INTEGER NOT NULL DEFAULT 0,
    updated_at    BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, mailbox_id)
);

-- The Sent-folder appends still owed: a row is written in the transaction
-- that records a send from a connected mailbox as handed off, and removed
-- once the message is in the Sent folder (found there by its Message-ID,
-- or appended). Its lease lets one appender work it at a time.
CREATE TABLE imap_appends (
    tenant       TEXT NOT NULL,
    send_id      TEXT NOT NULL,
    mailbox_id   TEXT NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    next_at      BIGINT NOT NULL,
    holder       TEXT NOT NULL DEFAULT '',
    lease_until  BIGINT NOT NULL DEFAULT 0,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (send_id)
);
CREATE INDEX imap_appends_due ON imap_appends (next_at);
