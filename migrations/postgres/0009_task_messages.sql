-- Messages people send to a task while it runs (POST /v1/tasks/{id}/messages), numbered per task
-- from 1. The engine keeps the number of the last one it took in its checkpoint. Embedded by
-- crates/cairn/src/store/postgres/schema.rs.
CREATE TABLE task_messages (
    task_id    uuid        NOT NULL REFERENCES tasks (id),
    seq        integer     NOT NULL CHECK (seq >= 1),
    kind       text        NOT NULL,
    text       text        NOT NULL,
    author     text,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (task_id, seq)
);
