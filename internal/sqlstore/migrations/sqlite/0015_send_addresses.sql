-- One row per distinct recipient (to, cc, bcc) of a send, so that
-- GET /v1/sends?recipient=ada@example.com finds the sends by index instead
-- of reading every send's addresses. address is the bare address, lower
-- case (core.NormalizeAddress). The rows are written in the accept's own
-- transaction (with the batch's send rows, one multi-row insert).
--
-- No foreign key: SQLite deletes a parent's children by a scan of the child
-- table unless an index leads with send_id, and a second index would double
-- the accept's cost here. PurgeSends deletes the rows itself, in one pass.
CREATE TABLE send_addresses (
    tenant  TEXT NOT NULL,
    address TEXT NOT NULL,
    send_id TEXT NOT NULL,
    PRIMARY KEY (tenant, address, send_id)
) WITHOUT ROWID;

-- The sends accepted before this migration. A stored address is bare or
-- `"Name" <addr>`: the address is what follows the last '<', without the
-- '>'. lower() folds ASCII only, as SQLite's does: an old send to a
-- non-ASCII address is found by the address as it was stored.
INSERT OR IGNORE INTO send_addresses (tenant, address, send_id)
SELECT tenant, lower(trim(rtrim(substr(v, length(rtrim(v, replace(v, '<', ''))) + 1), '>'))), id
FROM (SELECT s.tenant, s.id, trim(j.value) AS v
      FROM sends s, json_each(s.to_addrs) j
      UNION ALL SELECT s.tenant, s.id, trim(j.value) FROM sends s, json_each(s.cc_addrs) j
      UNION ALL SELECT s.tenant, s.id, trim(j.value) FROM sends s, json_each(s.bcc_addrs) j);
