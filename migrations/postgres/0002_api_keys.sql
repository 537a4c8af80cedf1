-- API keys and SSE stream tokens (issue #13). Embedded by src/store/postgres/schema.rs.

-- One row per key. The secret is never stored: only the SHA-256 (hex) of it, compared in
-- constant time. `scopes` is a comma-separated list of `read`, `submit`, `admin`.
CREATE TABLE api_keys (
    id           text        PRIMARY KEY,
    tenant_id    text        NOT NULL,
    scopes       text        NOT NULL,
    name         text,
    secret_hash  text        NOT NULL,
    created_at   timestamptz NOT NULL,
    revoked_at   timestamptz
);

-- Short-lived, task-scoped tokens for EventSource (which cannot send headers); only the
-- SHA-256 of the token is stored. Expired rows are deleted when new tokens are issued.
CREATE TABLE stream_tokens (
    token_hash  text        PRIMARY KEY,
    task_id     uuid        NOT NULL REFERENCES tasks (id),
    tenant_id   text        NOT NULL,
    key_id      text        NOT NULL,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX stream_tokens_expiry_idx ON stream_tokens (expires_at);

-- Tenant-scoped reads of the append-only tables join the task row by its primary key; keys of
-- tool receipts already derive from the task id.
