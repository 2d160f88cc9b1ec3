-- Replies and forwards (issue 8, the compatibility routes).
-- in_reply_to is the parent's msg-id with brackets, or NULL; refs is a JSON
-- array of msg-ids for the References header ("references" is an SQL
-- keyword). forward_raw is the forwarded original, whole (RFC 5322), kept
-- with the send so that every attempt renders the same message/rfc822
-- attachment even after the original is purged.

ALTER TABLE sends ADD COLUMN in_reply_to TEXT;
ALTER TABLE sends ADD COLUMN refs TEXT NOT NULL DEFAULT '[]';
ALTER TABLE sends ADD COLUMN forward_raw BYTEA;
