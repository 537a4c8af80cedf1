-- The registered tools a task may use, mirroring migrations/postgres/0008_task_tools.sql: a
-- JSON array of tool names, or NULL for every registered tool.
ALTER TABLE tasks ADD COLUMN tools TEXT;
