-- Sessions of the web dashboard (issue 20). id is the SHA-256 (hex) of the
-- cookie's value, so a leaked table opens no session; csrf is the token
-- every state-changing form carries; times are Unix microseconds. The
-- session holds the key's id, not its scopes: they are read from the key
-- on every request, so revoking the key ends the session.
CREATE TABLE dashboard_sessions (
    id         TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL,
    api_key_id TEXT NOT NULL,
    csrf       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    seen_at    BIGINT NOT NULL
);
CREATE INDEX dashboard_sessions_created ON dashboard_sessions (created_at);
