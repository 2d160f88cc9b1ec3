-- Whole messages (issue 17): scheduled sends and attachments.
--
-- scheduled_at is when a scheduled send was due (NULL: sent at once). A
-- scheduled send waits in status 'scheduled' with next_attempt_at at that
-- time; the claimer makes it queued when it comes (sends_scheduled finds
-- them). attachment_count says whether the attempt must read
-- send_attachments, which keeps each file's bytes once, as given.
ALTER TABLE sends ADD COLUMN scheduled_at BIGINT;
ALTER TABLE sends ADD COLUMN attachment_count BIGINT NOT NULL DEFAULT 0;
CREATE INDEX sends_scheduled ON sends (next_attempt_at) WHERE status = 'scheduled';

CREATE TABLE send_attachments (
    send_id      TEXT NOT NULL REFERENCES sends (id) ON DELETE CASCADE,
    idx          BIGINT NOT NULL,
    filename     TEXT NOT NULL,
    content_type TEXT NOT NULL,
    content_id   TEXT NOT NULL DEFAULT '',
    data         BYTEA NOT NULL,
    PRIMARY KEY (send_id, idx)
);

-- One row per tag of a send, so that GET /v1/sends?tag=name:value finds
-- the tagged sends by index instead of reading every send's tags.
CREATE TABLE send_tags (
    tenant  TEXT NOT NULL,
    name    TEXT NOT NULL,
    value   TEXT NOT NULL,
    send_id TEXT NOT NULL REFERENCES sends (id) ON DELETE CASCADE,
    PRIMARY KEY (tenant, name, value, send_id)
);
