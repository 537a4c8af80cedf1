-- Event payloads as JSON text (issue 12), as migration 0005 did for the checkpoint. Every
-- durable step inserts several event rows, and nothing inside the database looks into their
-- `data`: events are read back whole, by task and seq, and the API serves them as they were
-- written. As jsonb, each payload was parsed and its keys sorted by Postgres on insert and
-- turned back into text on every read; as text it is stored as the engine wrote it. Existing
-- payloads are converted as they are (a rewrite of the table, under its lock, once).
-- Embedded by src/store/postgres/schema.rs.
ALTER TABLE events ALTER COLUMN data TYPE text USING data::text;
