-- cairn on Postgres: the initial schema (ARCHITECTURE §5).
-- Embedded in the binary by src/store/postgres/migrations.rs; never edit an applied migration,
-- add a new numbered file instead (the checksum of each applied file is verified at start).

-- The hot row of a task: lifecycle, budget and the lease columns a worker's writes are fenced on.
CREATE TABLE tasks (
    id                 uuid        PRIMARY KEY,
    tenant_id          text        NOT NULL,
    goal               text        NOT NULL,
    strategy           text        NOT NULL
        CHECK (strategy IN ('direct', 'one_shot', 'reactive', 'v1', 'v2', 'auto')),
    budget_tokens      bigint      NOT NULL CHECK (budget_tokens >= 0),
    budget_tool_calls  bigint      NOT NULL CHECK (budget_tool_calls >= 0),
    budget_wall_ms     bigint      NOT NULL CHECK (budget_wall_ms >= 0),
    metadata           jsonb       NOT NULL DEFAULT '{}'::jsonb,
    status             text        NOT NULL
        CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'budget_exhausted', 'cancelled')),
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    started_at         timestamptz,
    finished_at        timestamptz,
    plan_version       integer,
    result             jsonb,
    attempts           integer     NOT NULL DEFAULT 0,
    last_seq           bigint      NOT NULL DEFAULT 0,
    -- The engine's checkpoint, handed to the next worker that claims the task.
    state              jsonb,
    claimed_by         text,
    lease_expires_at   timestamptz,
    fence              bigint      NOT NULL DEFAULT 0,
    -- A running task always has a lease; nothing else does.
    CONSTRAINT tasks_lease_iff_running CHECK (
        (status = 'running') = (claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL)
    )
);

-- Claiming: the oldest queued task first (ids are UUIDv7, so id order is creation order).
CREATE INDEX tasks_claim_idx ON tasks (id) WHERE status = 'queued';
-- Reaping: running tasks by lease expiry.
CREATE INDEX tasks_reap_idx ON tasks (lease_expires_at) WHERE status = 'running';
-- Listing a tenant's tasks newest first, with and without a status filter.
CREATE INDEX tasks_tenant_idx ON tasks (tenant_id, id DESC);
CREATE INDEX tasks_tenant_status_idx ON tasks (tenant_id, status, id DESC);

-- Append-only history: a global id for total order, a dense per-task seq for SSE ids.
CREATE TABLE events (
    id          bigserial   PRIMARY KEY,
    task_id     uuid        NOT NULL REFERENCES tasks (id),
    seq         bigint      NOT NULL CHECK (seq >= 1),
    kind        text        NOT NULL,
    data        jsonb       NOT NULL,
    created_at  timestamptz NOT NULL,
    CONSTRAINT events_task_seq_key UNIQUE (task_id, seq)
);

-- Immutable plan snapshots; a replan writes a new version, never an UPDATE.
CREATE TABLE plan_versions (
    task_id        uuid        NOT NULL REFERENCES tasks (id),
    version        integer     NOT NULL CHECK (version >= 1),
    reason         text        NOT NULL,
    caused_by_seq  bigint,
    plan           jsonb       NOT NULL,
    created_at     timestamptz NOT NULL,
    PRIMARY KEY (task_id, version)
);

-- Append-only ledger movements; a task's ledger is derived from them.
CREATE TABLE ledger_entries (
    id            bigserial   PRIMARY KEY,
    task_id       uuid        NOT NULL REFERENCES tasks (id),
    milestone_id  text,
    kind          text        NOT NULL,
    unit          text        NOT NULL CHECK (unit IN ('tokens', 'tool_calls', 'wall_ms')),
    amount        bigint      NOT NULL,
    created_at    timestamptz NOT NULL
);
CREATE INDEX ledger_entries_task_idx ON ledger_entries (task_id, id);

CREATE TABLE artifacts (
    id            bigserial   PRIMARY KEY,
    task_id       uuid        NOT NULL REFERENCES tasks (id),
    milestone_id  text        NOT NULL,
    name          text        NOT NULL,
    value         jsonb       NOT NULL,
    created_at    timestamptz NOT NULL
);
CREATE INDEX artifacts_task_idx ON artifacts (task_id, id);

-- Results of side-effecting tool calls, so a resumed step is never performed twice. No foreign
-- key on task_id: the key alone identifies a receipt, and the tool layer may record one before
-- (or without) the task row being visible to it.
CREATE TABLE tool_receipts (
    idempotency_key  text        PRIMARY KEY,
    task_id          uuid        NOT NULL,
    tool             text        NOT NULL,
    response         jsonb       NOT NULL,
    created_at       timestamptz NOT NULL
);
CREATE INDEX tool_receipts_task_idx ON tool_receipts (task_id);

-- Client Idempotency-Key -> the task its first request created.
CREATE TABLE idempotency_keys (
    tenant_id     text        NOT NULL,
    key           text        NOT NULL,
    request_hash  text        NOT NULL,
    task_id       uuid        NOT NULL REFERENCES tasks (id),
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
