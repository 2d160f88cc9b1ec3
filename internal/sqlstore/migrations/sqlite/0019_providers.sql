-- Provider transports (issue 29, API contract section 15): which provider
-- holds a send, or may hold it after an attempt whose answer was lost.
--
-- transport is the transport's URL with its credentials redacted, provider
-- its kind (ses, resend), message_id the provider's own id for the message
-- ('' while it is not known: then the send is pinned to that transport,
-- and SES and Resend events are matched by the message's Message-ID).
-- since is when the send was first handed to it.
CREATE TABLE send_providers (
    send_id    TEXT PRIMARY KEY REFERENCES sends (id) ON DELETE CASCADE,
    tenant     TEXT NOT NULL,
    transport  TEXT NOT NULL,
    provider   TEXT NOT NULL,
    message_id TEXT NOT NULL,
    since      INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX send_providers_message ON send_providers (provider, message_id);
