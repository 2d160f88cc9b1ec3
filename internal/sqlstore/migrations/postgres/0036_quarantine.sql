-- Quarantine (docs/agents.md, "Quarantine").
--
-- mailboxes.quarantine: the inbox's rule, 'dmarc_fail' (mail failing
-- DMARC for its From domain is quarantined: the contract's default),
-- 'unknown_senders' (that, and mail from an address the tenant never
-- corresponded with) or 'none'.
ALTER TABLE mailboxes ADD COLUMN quarantine TEXT NOT NULL DEFAULT 'dmarc_fail';
-- received_messages.folder: 'inbox', or 'quarantine' for a message kept
-- from agents until an admin releases it. A quarantined message is in no
-- thread (thread_id '') until then.
ALTER TABLE received_messages ADD COLUMN folder TEXT NOT NULL DEFAULT 'inbox';
-- received_messages.sender: the From's bare address, lower case, so that
-- "has the tenant accepted mail from this address" is an index lookup.
ALTER TABLE received_messages ADD COLUMN sender TEXT NOT NULL DEFAULT '';
-- The messages received before this migration. A stored From is bare or
-- `Name <addr>`: the address is what follows the last '<', without the '>'.
UPDATE received_messages SET sender = lower(btrim(coalesce(substring(from_addr from '<([^<>]*)>$'), from_addr)));
CREATE INDEX received_messages_sender ON received_messages (tenant, sender);
CREATE INDEX received_messages_folder ON received_messages (tenant, folder, id);
