-- Fair claims between tenants (ClaimDue): the tenants with queued sends are
-- found by skipping through this index (one seek per tenant, however long
-- a tenant's backlog), and each tenant's oldest due sends by one seek.
CREATE INDEX sends_due_tenant ON sends (tenant, next_attempt_at) WHERE status = 'queued';
