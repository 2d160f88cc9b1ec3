-- DMARC aggregate reports (docs/deliverability.md, "DMARC aggregate
-- reports").
--
-- dmarc_inboxes: the mailboxes whose mail is read as reports (the inbox
-- setting dmarc_reports); gone with the mailbox.
CREATE TABLE dmarc_inboxes (
    tenant     TEXT NOT NULL,
    mailbox_id TEXT NOT NULL,
    PRIMARY KEY (tenant, mailbox_id),
    FOREIGN KEY (tenant, mailbox_id) REFERENCES mailboxes (tenant, id) ON DELETE CASCADE
);
-- One row per report, once per tenant and dedup_key (the reporter and
-- its report id): a report mailed again writes nothing. The totals are
-- kept with it so that lists and the daily chart read no records.
-- policy is the published policy as JSON.
CREATE TABLE dmarc_reports (
    id            TEXT PRIMARY KEY,
    tenant        TEXT NOT NULL,
    mailbox_id    TEXT NOT NULL,
    dedup_key     TEXT NOT NULL,
    org_name      TEXT NOT NULL,
    email         TEXT NOT NULL,
    extra_contact TEXT NOT NULL,
    report_id     TEXT NOT NULL,
    domain        TEXT NOT NULL,
    begin_at      BIGINT NOT NULL,
    end_at        BIGINT NOT NULL,
    policy        TEXT NOT NULL,
    messages      BIGINT NOT NULL,
    pass          BIGINT NOT NULL,
    fail          BIGINT NOT NULL,
    record_count  INTEGER NOT NULL,
    received_at   BIGINT NOT NULL,
    UNIQUE (tenant, dedup_key)
);
CREATE INDEX dmarc_reports_domain ON dmarc_reports (tenant, domain, end_at);
-- A report's records in order; pass is 1 when DKIM or SPF was aligned and
-- passing. detail is the reasons and the DKIM and SPF results as JSON.
CREATE TABLE dmarc_records (
    report        TEXT NOT NULL REFERENCES dmarc_reports (id) ON DELETE CASCADE,
    n             INTEGER NOT NULL,
    source_ip     TEXT NOT NULL,
    messages      BIGINT NOT NULL,
    disposition   TEXT NOT NULL,
    dkim          TEXT NOT NULL,
    spf           TEXT NOT NULL,
    pass          INTEGER NOT NULL,
    header_from   TEXT NOT NULL,
    envelope_from TEXT NOT NULL,
    envelope_to   TEXT NOT NULL,
    detail        TEXT NOT NULL,
    PRIMARY KEY (report, n)
);
