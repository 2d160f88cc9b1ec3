-- A received message's preview: the start of its text, at most 200
-- characters, written when it is received. Lists of received messages
-- and a thread's messages show it instead of reading the bodies, so that
-- a list costs no memory in proportion to what strangers sent (a list of
-- 100 messages of 8 MB each read 800 MB). Existing rows get the start of
-- their text as stored.
ALTER TABLE received_messages ADD COLUMN preview TEXT NOT NULL DEFAULT '';
UPDATE received_messages SET preview = left(text_body, 200);
