-- Messages people send to a task while it runs, mirroring
-- migrations/postgres/0009_task_messages.sql.
CREATE TABLE task_messages (
    task_id    TEXT    NOT NULL REFERENCES tasks (id),
    seq        INTEGER NOT NULL CHECK (seq >= 1),
    kind       TEXT    NOT NULL,
    text       TEXT    NOT NULL,
    author     TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (task_id, seq)
) STRICT;
