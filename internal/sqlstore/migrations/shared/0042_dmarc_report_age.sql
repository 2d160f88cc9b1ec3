-- DMARC reports by when they came (docs/deliverability.md, "DMARC
-- aggregate reports"): the retention purge deletes a range of the first
-- index; a tenant at its cap drops its oldest report through the second.
CREATE INDEX dmarc_reports_received ON dmarc_reports (received_at);
CREATE INDEX dmarc_reports_tenant_received ON dmarc_reports (tenant, received_at);
