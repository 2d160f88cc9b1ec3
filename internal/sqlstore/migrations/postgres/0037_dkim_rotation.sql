-- DKIM key rotation (docs/deliverability.md, "Rotating the DKIM key").
--
-- The signing key stays in domains (selector, private_key, public_record):
-- signing reads one row as before. domain_dkim_keys holds a domain's other
-- keys, one row per selector:
--   state 'pending': made by POST /v1/domains/{domain}/dkim/rotate, not
--     signing yet; a domain check that finds its record published moves it
--     into domains (in one transaction) and the former key here as
--     'retiring'. At most one per domain (the partial unique index).
--   state 'retiring': stopped signing at since; its record stays published
--     so that mail signed before still verifies. Once --dkim-retire-after
--     has passed, the API lists it for removal ("retired", computed from
--     since: no job has to run for it).
-- since is when the key entered its state (unix microseconds).
-- private_key is sealed exactly as domains.private_key (dkim.Seal).
CREATE TABLE domain_dkim_keys (
    tenant        TEXT NOT NULL,
    domain        TEXT NOT NULL,
    selector      TEXT NOT NULL,
    algorithm     TEXT NOT NULL,
    private_key   BYTEA NOT NULL,
    public_record TEXT NOT NULL,
    state         TEXT NOT NULL,
    since         BIGINT NOT NULL,
    PRIMARY KEY (tenant, domain, selector),
    FOREIGN KEY (tenant, domain) REFERENCES domains (tenant, domain) ON DELETE CASCADE
);
CREATE UNIQUE INDEX domain_dkim_keys_one_pending ON domain_dkim_keys (tenant, domain) WHERE state = 'pending';
-- The periodic domain check finds the domains with a pending key.
CREATE INDEX domain_dkim_keys_state ON domain_dkim_keys (state);
