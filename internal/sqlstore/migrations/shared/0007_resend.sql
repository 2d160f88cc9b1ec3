-- Resend-compatible management routes (issue 19).
-- domains.status is the outcome of the last DNS check of the domain
-- (POST /domains/{id}/verify): not_started until one ran, pending while it
-- runs, verified when the published DKIM key is the stored one, failed
-- otherwise. Sending never reads it: a domain signs from the moment it is
-- added.
-- templates.compat holds what Resend's hosted templates have and sendonce's
-- do not (name, alias, from, reply_to, variables with fallbacks, published
-- state) as a JSON object; '' for a template made with PUT /v1/templates.

ALTER TABLE domains ADD COLUMN status TEXT NOT NULL DEFAULT 'not_started';
ALTER TABLE templates ADD COLUMN compat TEXT NOT NULL DEFAULT '';
