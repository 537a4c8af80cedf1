-- API keys and SSE stream tokens, mirroring migrations/postgres/0002_api_keys.sql.
-- Times are INTEGER milliseconds since the Unix epoch; uuids lowercase hyphenated TEXT.

-- The secret is never stored: only its SHA-256 (hex), compared in constant time.
CREATE TABLE api_keys (
    id           TEXT    PRIMARY KEY NOT NULL,
    tenant_id    TEXT    NOT NULL,
    scopes       TEXT    NOT NULL,
    name         TEXT,
    secret_hash  TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER
);

CREATE TABLE stream_tokens (
    token_hash  TEXT    PRIMARY KEY NOT NULL,
    task_id     TEXT    NOT NULL REFERENCES tasks (id),
    tenant_id   TEXT    NOT NULL,
    key_id      TEXT    NOT NULL,
    expires_at  INTEGER NOT NULL
);
CREATE INDEX stream_tokens_expiry_idx ON stream_tokens (expires_at);
