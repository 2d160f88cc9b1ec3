-- What each tenant keeps of received mail, kept current by the writes that
-- add and remove received messages: the storage cap is checked before every
-- message is stored, and summing the message rows for it read every stored
-- message each time (on SQLite the size column sits behind the bodies, in
-- their overflow pages) — quadratic in a tenant's mail.
CREATE TABLE received_usage (
    tenant   TEXT PRIMARY KEY,
    messages BIGINT NOT NULL,
    bytes    BIGINT NOT NULL
);
INSERT INTO received_usage (tenant, messages, bytes)
    SELECT tenant, count(*), coalesce(sum(size), 0) FROM received_messages GROUP BY tenant;
