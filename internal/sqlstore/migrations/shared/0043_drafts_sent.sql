-- Sent drafts by when they were sent (docs/agents.md, "Drafts"): the
-- retention purge deletes a sent draft once its send is purged, a range
-- of this index.
CREATE INDEX drafts_sent ON drafts (sent_at) WHERE sent_at IS NOT NULL;
