-- One-click unsubscribe (docs/deliverability.md, "One-click unsubscribe").
--
-- sends.unsubscribe: the caller asked for the unsubscribe headers on a
-- send that is not bulk (bulk sends always carry them).
ALTER TABLE sends ADD COLUMN unsubscribe INTEGER NOT NULL DEFAULT 0;
-- suppressions.stream: the stream an entry holds back, '' for every
-- stream. An unsubscribe holds back bulk mail only; bounces, complaints
-- and manual entries keep holding back everything.
ALTER TABLE suppressions ADD COLUMN stream TEXT NOT NULL DEFAULT '';
-- One row per recipient of a send who unsubscribed, whichever way (the
-- link or the mailto: address) and however often: the suppression and the
-- email.unsubscribed event are written with it, once.
CREATE TABLE unsubscribes (
    send_id    TEXT NOT NULL REFERENCES sends (id) ON DELETE CASCADE,
    address    TEXT NOT NULL,
    via        TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (send_id, address)
);
