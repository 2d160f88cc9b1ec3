-- The reputation guard (docs/deliverability.md, "The reputation guard").
-- A tenant's stream as the guard left it: state 'active' or 'paused'.
-- The row is the one decision every process shares: a change is a
-- conditional UPDATE from the other state, so two processes judging at
-- once pause the stream (and queue stream.paused) once. judge_from is the
-- last resume: a resumed stream is judged on the mail handed off after it.
CREATE TABLE tenant_streams (
    tenant     TEXT NOT NULL,
    stream     TEXT NOT NULL,
    state      TEXT NOT NULL,
    changed_at BIGINT NOT NULL,
    judge_from BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, stream)
);

-- Each complaint and permanent bounce of a recipient of a bulk send, once
-- per (send, recipient, kind) however many reports say it.
CREATE TABLE stream_outcomes (
    send_id   TEXT NOT NULL REFERENCES sends (id) ON DELETE CASCADE,
    recipient TEXT NOT NULL,
    kind      TEXT NOT NULL,
    tenant    TEXT NOT NULL,
    stream    TEXT NOT NULL,
    at        BIGINT NOT NULL,
    PRIMARY KEY (send_id, recipient, kind)
);
CREATE INDEX stream_outcomes_tenant_at ON stream_outcomes (tenant, stream, at);

-- The rates' denominator: a tenant's bulk sends handed off in the window,
-- one range of this index (only bulk rows are in it).
CREATE INDEX sends_bulk_sent ON sends (tenant, sent_at) WHERE stream = 'bulk' AND sent_at IS NOT NULL;
