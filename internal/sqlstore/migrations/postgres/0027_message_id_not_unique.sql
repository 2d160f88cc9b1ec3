-- A send's Message-ID is no longer unique across the database. Generated
-- ones are unique by construction (they hold the send id); a message a
-- client submits keeps its own, and two clients — two tenants even — may
-- give the same one, which a mail server accepts (a global UNIQUE made
-- such a message fail with a transient error on every retry, and let one
-- tenant block another's message). It was also one more random index
-- written on every accept; the one lookup by Message-ID (a provider's
-- report on a send whose provider id never came back) goes through
-- send_providers instead.
ALTER TABLE sends DROP CONSTRAINT IF EXISTS sends_message_id_key;
