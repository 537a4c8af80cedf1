-- Approvals, mirroring migrations/postgres/0010_approvals.sql. SQLite cannot change a CHECK
-- constraint in place, so `tasks` is rebuilt (the documented twelve-step way): the rows the
-- other tables hold reference `tasks` by name and find it again once the new table takes the
-- name; deferring the foreign keys lets the old table go first within this transaction.
PRAGMA defer_foreign_keys = ON;

CREATE TABLE tasks_new (
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
        CHECK (status IN ('queued', 'running', 'awaiting_approval', 'succeeded', 'failed',
                          'budget_exhausted', 'cancelled')),
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    started_at        INTEGER,
    finished_at       INTEGER,
    plan_version      INTEGER,
    result            TEXT,
    attempts          INTEGER NOT NULL DEFAULT 0,
    last_seq          INTEGER NOT NULL DEFAULT 0,
    state             TEXT,
    claimed_by        TEXT,
    lease_expires_at  INTEGER,
    fence             INTEGER NOT NULL DEFAULT 0,
    tools             TEXT,
    approval          TEXT    NOT NULL DEFAULT 'none' CHECK (approval IN ('none', 'plan', 'steps')),
    CONSTRAINT tasks_lease_iff_running CHECK (
        (status = 'running') = (claimed_by IS NOT NULL AND lease_expires_at IS NOT NULL)
    )
) STRICT;

INSERT INTO tasks_new (id, tenant_id, goal, strategy, budget_tokens, budget_tool_calls,
    budget_wall_ms, metadata, status, created_at, updated_at, started_at, finished_at,
    plan_version, result, attempts, last_seq, state, claimed_by, lease_expires_at, fence, tools)
SELECT id, tenant_id, goal, strategy, budget_tokens, budget_tool_calls, budget_wall_ms,
    metadata, status, created_at, updated_at, started_at, finished_at, plan_version, result,
    attempts, last_seq, state, claimed_by, lease_expires_at, fence, tools
FROM tasks;

DROP TABLE tasks;
ALTER TABLE tasks_new RENAME TO tasks;

CREATE INDEX tasks_tenant_id ON tasks (tenant_id, id);
CREATE INDEX tasks_tenant_status_id ON tasks (tenant_id, status, id);
CREATE INDEX tasks_queued ON tasks (id) WHERE status = 'queued';
CREATE INDEX tasks_running_lease ON tasks (lease_expires_at) WHERE status = 'running';
CREATE INDEX tasks_running_tenant ON tasks (tenant_id) WHERE status = 'running';

CREATE TABLE task_approvals (
    task_id    TEXT    NOT NULL REFERENCES tasks (id),
    id         INTEGER NOT NULL CHECK (id >= 1),
    kind       TEXT    NOT NULL CHECK (kind IN ('plan', 'steps')),
    state      TEXT    NOT NULL
        CHECK (state IN ('pending', 'approved', 'rejected', 'revised', 'expired')),
    digest     TEXT    NOT NULL,
    request    TEXT    NOT NULL,
    comment    TEXT,
    decided_by TEXT,
    created_at INTEGER NOT NULL,
    decided_at INTEGER,
    expires_at INTEGER,
    PRIMARY KEY (task_id, id)
) STRICT;
CREATE INDEX task_approvals_expiry ON task_approvals (expires_at) WHERE state = 'pending';
