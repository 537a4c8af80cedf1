-- The checkpoint (`tasks.state`, several KiB, rewritten by every commit), the result and the
-- plan snapshots are compressed with lz4 instead of the default pglz when this server supports
-- it (PostgreSQL 14+ built with lz4): cheaper for the CPU on every write and read. Existing
-- values keep their compression until rewritten. Elsewhere the columns stay as they are.
-- Embedded by src/store/postgres/schema.rs.
DO $$
BEGIN
    ALTER TABLE tasks ALTER COLUMN state SET COMPRESSION lz4;
    ALTER TABLE tasks ALTER COLUMN result SET COMPRESSION lz4;
    ALTER TABLE plan_versions ALTER COLUMN plan SET COMPRESSION lz4;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'lz4 column compression not available (%); keeping the default', SQLERRM;
END
$$;
