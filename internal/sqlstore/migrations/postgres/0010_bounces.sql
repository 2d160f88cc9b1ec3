-- Bounces, complaints and suppressions (issue 16, API contract section 11).

-- A suppression gets the id Resend's clients address it by, where it came
-- from (bounce, complaint or manual) and the send that caused it ('' for
-- a manual entry).
ALTER TABLE suppressions ADD COLUMN id TEXT NOT NULL DEFAULT '';
ALTER TABLE suppressions ADD COLUMN origin TEXT NOT NULL DEFAULT 'manual';
ALTER TABLE suppressions ADD COLUMN send_id TEXT NOT NULL DEFAULT '';
UPDATE suppressions SET id = 'sup_' || md5(random()::text || address) WHERE id = '';
CREATE UNIQUE INDEX suppressions_tenant_id ON suppressions (tenant, id);

-- Each recipient's own outcome once something happened to it; a recipient
-- without a row takes its send's status (accepting a send writes none).
CREATE TABLE send_recipients (
    send_id    TEXT NOT NULL REFERENCES sends (id) ON DELETE CASCADE,
    address    TEXT NOT NULL,
    status     TEXT NOT NULL,
    detail     TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (send_id, address)
);

-- Reports already recorded, by a digest of their machine-readable part:
-- the same report received twice is recorded once.
CREATE TABLE inbound_reports (
    digest      TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    send_id     TEXT NOT NULL,
    received_at BIGINT NOT NULL
);

-- Inbound mail that could not be used (no report, no matching send): kept
-- for an operator, answered 250. tenant is '' when the send is gone.
CREATE TABLE inbound_unmatched (
    id          TEXT PRIMARY KEY,
    tenant      TEXT NOT NULL,
    send_id     TEXT NOT NULL,
    mail_from   TEXT NOT NULL,
    rcpt_to     TEXT NOT NULL,
    reason      TEXT NOT NULL,
    raw         BYTEA NOT NULL,
    received_at BIGINT NOT NULL
);
CREATE INDEX inbound_unmatched_tenant_id ON inbound_unmatched (tenant, id);

-- Secrets every process of one deployment shares, made once by the first
-- that needs one (the VERP token key: name 'verp').
CREATE TABLE server_secrets (
    name       TEXT PRIMARY KEY,
    value      BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);
