-- The checkpoint (`tasks.state`) is rewritten by every commit and read back only by the next
-- claim; nothing inside the database looks into it. Stored as JSON text, so Postgres no longer
-- parses several KiB of JSON into jsonb (and sorts every object's keys) on each commit: that
-- was the largest part of its CPU per durable step (docs/benchmarks.md, 2026-12-03). The engine
-- writes and reads it as JSON; existing checkpoints are converted as they are.
-- Embedded by src/store/postgres/schema.rs.
ALTER TABLE tasks ALTER COLUMN state TYPE text USING state::text;
-- Compressed, a checkpoint fits in the row (8 KiB of JSON is about 2 KiB of lz4): kept there
-- (MAIN) instead of being moved to the TOAST table once the row passes 2 KiB, which cost a
-- TOAST insert and delete (and their index entries) on more than half the commits.
ALTER TABLE tasks ALTER COLUMN state SET STORAGE MAIN;

DO $$
BEGIN
    ALTER TABLE tasks ALTER COLUMN state SET COMPRESSION lz4;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'lz4 column compression not available (%); keeping the default', SQLERRM;
END
$$;
