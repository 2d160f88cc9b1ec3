-- Sending domains and their DKIM keys (issue 7). One active selector per
-- domain and tenant: adding a domain that exists is a conflict.
-- private_key is the output of dkim.Seal: a sealed PEM block when
-- SENDONCE_SECRET_KEY is set, else the plaintext PKCS#8 PEM.
-- public_record is the DKIM TXT value to publish ("v=DKIM1; k=…; p=…").

CREATE TABLE domains (
    tenant        TEXT NOT NULL,
    domain        TEXT NOT NULL,
    selector      TEXT NOT NULL,
    algorithm     TEXT NOT NULL,
    private_key   BYTEA NOT NULL,
    public_record TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (tenant, domain)
);
