-- Money as a budget unit, mirroring migrations/postgres/0011_money.sql. SQLite cannot change a
-- CHECK constraint in place, so `ledger_entries` is rebuilt with `cost` among its units;
-- nothing references it, and its ids are kept.
ALTER TABLE tasks ADD COLUMN budget_cost INTEGER CHECK (budget_cost IS NULL OR budget_cost > 0);

CREATE TABLE ledger_entries_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id      TEXT    NOT NULL REFERENCES tasks (id),
    milestone_id TEXT,
    kind         TEXT    NOT NULL,
    unit         TEXT    NOT NULL CHECK (unit IN ('tokens', 'tool_calls', 'wall_ms', 'cost')),
    amount       INTEGER NOT NULL,
    created_at   INTEGER NOT NULL
) STRICT;

INSERT INTO ledger_entries_new (id, task_id, milestone_id, kind, unit, amount, created_at)
    SELECT id, task_id, milestone_id, kind, unit, amount, created_at FROM ledger_entries;
DROP TABLE ledger_entries;
ALTER TABLE ledger_entries_new RENAME TO ledger_entries;
CREATE INDEX ledger_entries_task ON ledger_entries (task_id, id);
