-- The reputation guard's rates per sending domain (docs/deliverability.md,
-- "The reputation guard"): the bulk sends handed off in the window, grouped
-- by From address, read from the index alone. It replaces sends_bulk_sent,
-- whose columns are its first two.
CREATE INDEX sends_bulk_sent_from ON sends (tenant, sent_at, from_addr) WHERE stream = 'bulk' AND sent_at IS NOT NULL;
DROP INDEX sends_bulk_sent;
