-- cairn's embedded schema, mirroring migrations/postgres (ARCHITECTURE §5).
-- Times are INTEGER milliseconds since the Unix epoch, so comparisons are exact; uuids are
-- lowercase hyphenated TEXT, whose lexical order equals UUIDv7 creation order; JSON is TEXT.

-- The hot row: one per task, with its lease columns. `last_seq` hands out per-task event seqs
-- inside the writing transaction; `fence` rises on every claim and cancel.
CREATE TABLE tasks (
    id                TEXT    PRIMARY KEY NOT NULL,
    tenant_id         TEXT    NOT NULL,
    goal              TEXT    NOT NULL,
    strategy          TEXT    NOT NULL
        CHECK (strategy IN ('direct', 'one_shot', 'reactive', 'v1', 'v2', 'auto')),
    budget_tokens     INTEGER NOT NULL CHECK (budget_tokens >= 0),
    budget_tool_calls INTEGER NOT NULL CHECK (budget_tool_calls >= 0),
    budget_wall_ms    INTEGER NOT NULL CHECK (budget_wall_ms >= 0),
    metadata          TEXT    NOT NULL DEFAULT '{}',
    status            TEXT    NOT NULL
        CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'budget_exhausted', 'cancelled')),
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    started_at        INTEGER,
    finished_at       INTEGER,
    plan_version      INTEGER,
    result            TEXT,
    attempts          INTEGER NOT NULL DEFAULT 0,
    last_seq          INTEGER NOT NULL DEFAULT 0,
    -- The engine's checkpoint, handed to the next claimer.
    state             TEXT,
    claimed_by        TEXT,
    lease_expires_at  INTEGER,
    fence             INTEGER NOT NULL DEFAULT 0,
    -- A running task always has a lease; nothing else does.
    CONSTRAINT tasks_lease_iff_running CHECK (
        (status = 'running') = (claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL)
    )
) STRICT;

-- Listing (newest first, optionally by status) and keyset pagination.
CREATE INDEX tasks_tenant_id ON tasks (tenant_id, id);
CREATE INDEX tasks_tenant_status_id ON tasks (tenant_id, status, id);
-- Claim (oldest queued first) and the reaper (expired running leases).
CREATE INDEX tasks_queued ON tasks (id) WHERE status = 'queued';
CREATE INDEX tasks_running_lease ON tasks (lease_expires_at) WHERE status = 'running';

-- Append-only history: a global id plus a dense per-task seq (the SSE id).
CREATE TABLE events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id    TEXT    NOT NULL REFERENCES tasks (id),
    seq        INTEGER NOT NULL CHECK (seq >= 1),
    kind       TEXT    NOT NULL,
    data       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (task_id, seq)
) STRICT;

CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;
CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;

-- Immutable plan snapshots, with the reason each was written and the event that caused it.
CREATE TABLE plan_versions (
    task_id       TEXT    NOT NULL REFERENCES tasks (id),
    version       INTEGER NOT NULL CHECK (version >= 1),
    reason        TEXT    NOT NULL,
    caused_by_seq INTEGER,
    plan          TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (task_id, version)
) STRICT;

CREATE TRIGGER plan_versions_immutable BEFORE UPDATE ON plan_versions
BEGIN
    SELECT RAISE(ABORT, 'plan versions are immutable');
END;

-- Append-only ledger movements; a task's ledger is derivable from its entries alone.
CREATE TABLE ledger_entries (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id      TEXT    NOT NULL REFERENCES tasks (id),
    milestone_id TEXT,
    kind         TEXT    NOT NULL,
    unit         TEXT    NOT NULL CHECK (unit IN ('tokens', 'tool_calls', 'wall_ms')),
    amount       INTEGER NOT NULL,
    created_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX ledger_entries_task ON ledger_entries (task_id, id);

-- Named outputs of milestones, append-only: a rewritten artifact (a retried step) adds a row,
-- and readers take the latest by id.
CREATE TABLE artifacts (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id      TEXT    NOT NULL REFERENCES tasks (id),
    milestone_id TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    value        TEXT    NOT NULL,
    created_at   INTEGER NOT NULL
) STRICT;

CREATE INDEX artifacts_task ON artifacts (task_id, id);

-- Results of side-effecting tool calls by idempotency key: a resumed step reads, not re-calls.
-- No foreign key on task_id (as on Postgres): the key alone identifies a receipt.
CREATE TABLE tool_receipts (
    idempotency_key TEXT    PRIMARY KEY NOT NULL,
    task_id         TEXT    NOT NULL,
    tool            TEXT    NOT NULL,
    response        TEXT    NOT NULL,
    created_at      INTEGER NOT NULL
) STRICT;

CREATE INDEX tool_receipts_task ON tool_receipts (task_id);

-- Client Idempotency-Keys on task creation: same key + same request hash -> same task.
CREATE TABLE idempotency_keys (
    tenant_id    TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    request_hash TEXT    NOT NULL,
    task_id      TEXT    NOT NULL REFERENCES tasks (id),
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, key)
) STRICT;
