-- The lean write path (issue 13). The send row is its own delivery job:
-- a queued send is due at next_attempt_at, claimed by setting it sending
-- with a lease, so no queue row is written per send and none can be
-- discarded while its send still waits. tries counts attempts begun (the
-- retry budget); attempts still counts those that reached the relay.
-- A queued send's creation is its row: no event row is written for it.

ALTER TABLE sends ADD COLUMN tries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sends ADD COLUMN next_attempt_at INTEGER;
UPDATE sends SET next_attempt_at = updated_at WHERE status = 'queued';
CREATE INDEX sends_due ON sends (next_attempt_at) WHERE status = 'queued';
