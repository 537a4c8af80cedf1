-- Approvals (POST /v1/tasks/{id}/approvals/{approval}): a task may wait, without a lease, for a
-- person to sign off its plan or its next calls. Embedded by
-- crates/cairn/src/store/postgres/schema.rs.
ALTER TABLE tasks DROP CONSTRAINT tasks_status_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_status_check CHECK (status IN
    ('queued', 'running', 'awaiting_approval', 'succeeded', 'failed', 'budget_exhausted',
     'cancelled'));
-- What the submitter asked to sign off; the operator's policy may ask for more.
ALTER TABLE tasks ADD COLUMN approval text NOT NULL DEFAULT 'none'
    CHECK (approval IN ('none', 'plan', 'steps'));

-- One request per wait, numbered per task from 1. `digest` is what a decision must name.
CREATE TABLE task_approvals (
    task_id    uuid        NOT NULL REFERENCES tasks (id),
    id         integer     NOT NULL CHECK (id >= 1),
    kind       text        NOT NULL CHECK (kind IN ('plan', 'steps')),
    state      text        NOT NULL
        CHECK (state IN ('pending', 'approved', 'rejected', 'revised', 'expired')),
    digest     text        NOT NULL,
    request    jsonb       NOT NULL,
    comment    text,
    decided_by text,
    created_at timestamptz NOT NULL,
    decided_at timestamptz,
    expires_at timestamptz,
    PRIMARY KEY (task_id, id)
);
-- The reaper's sweep of pending requests past their expiry.
CREATE INDEX task_approvals_expiry_idx ON task_approvals (expires_at) WHERE state = 'pending';
