-- Per-key request rate limit (issue 15 part 2): requests per
-- --rate-limit-window; 0 takes the server's --rate-limit, negative is none.
ALTER TABLE api_keys ADD COLUMN rate_limit INTEGER NOT NULL DEFAULT 0;
