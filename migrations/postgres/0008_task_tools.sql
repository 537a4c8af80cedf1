-- The registered tools a task may use, as its submitter narrowed them: a JSON array of tool
-- names, or NULL for every registered tool. Read back whole with the task, never queried into.
-- Embedded by crates/cairn/src/store/postgres/schema.rs.
ALTER TABLE tasks ADD COLUMN tools text;
