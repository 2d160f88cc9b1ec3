-- One copy per recipient (docs/deliverability.md, "One-click
-- unsubscribe"): a provider (SES, Resend) gives each copy of such a send
-- an id of its own. send_providers keeps the send's one record (its pin
-- and the latest id); this table keeps every copy's id, so that the
-- provider's events about any copy find their send.
CREATE TABLE send_provider_copies (
    provider   TEXT NOT NULL,
    message_id TEXT NOT NULL,
    send_id    TEXT NOT NULL REFERENCES sends (id) ON DELETE CASCADE,
    PRIMARY KEY (provider, message_id)
);
CREATE INDEX send_provider_copies_send ON send_provider_copies (send_id);
