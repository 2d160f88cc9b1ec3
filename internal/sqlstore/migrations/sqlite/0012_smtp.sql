-- SMTP submission (issue 18). raw_message is the client's own message,
-- kept as it arrived less its idempotency key header, and delivered as it
-- is (sendonce adds Message-ID and Date when absent, and the DKIM
-- signature). NULL for sends built from their fields.
ALTER TABLE sends ADD COLUMN raw_message BLOB;
