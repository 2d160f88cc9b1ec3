-- One row per distinct recipient (to, cc, bcc) of a send, so that
-- GET /v1/sends?recipient=ada@example.com finds the sends by index instead
-- of reading every send's addresses. address is the bare address, lower
-- case (core.NormalizeAddress). The rows are written in the accept's own
-- transaction (with the batch's send rows, one multi-row insert).
--
-- No foreign key, as on SQLite (where a cascade without an index leading
-- with send_id scans the table per deleted send): PurgeSends deletes the
-- rows itself, in one pass.
CREATE TABLE send_addresses (
    tenant  TEXT NOT NULL,
    address TEXT NOT NULL,
    send_id TEXT NOT NULL,
    PRIMARY KEY (tenant, address, send_id)
);

-- The sends accepted before this migration. A stored address is bare or
-- `"Name" <addr>`: the address is what follows the last '<', without the
-- '>'.
INSERT INTO send_addresses (tenant, address, send_id)
SELECT DISTINCT tenant, lower(btrim(coalesce(substring(v from '<([^<>]*)>$'), v))), id
FROM (SELECT s.tenant, s.id, btrim(j.v) AS v
      FROM sends s, json_array_elements_text(s.to_addrs::json) AS j(v)
      UNION ALL SELECT s.tenant, s.id, btrim(j.v) FROM sends s, json_array_elements_text(s.cc_addrs::json) AS j(v)
      UNION ALL SELECT s.tenant, s.id, btrim(j.v) FROM sends s, json_array_elements_text(s.bcc_addrs::json) AS j(v)) a
ON CONFLICT DO NOTHING;
