-- Fewer index entries per step (issue 12). Every committed step inserts event rows and ledger
-- entries, each of which paid for two b-tree entries: its global `id` primary key and the
-- per-task index every read goes through. No statement reads a row by its global id (events
-- are read by task and seq, ledger entries and artifacts by task in id order), so the per-task
-- index becomes the primary key and the id-only one is dropped. The ids stay, drawn from the
-- same sequences: events keep their global id for total order (ARCHITECTURE §5), ledger
-- entries and artifacts their order within a task, and they are still unique (a sequence
-- never hands out a value twice). Measured over 200 tasks x 8 single-step milestones: 53 of
-- the 84 WAL records a step wrote were b-tree inserts; with this, 27 (docs/benchmarks.md).
ALTER TABLE events DROP CONSTRAINT events_pkey;
ALTER TABLE events DROP CONSTRAINT events_task_seq_key;
ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (task_id, seq);

ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_pkey;
DROP INDEX ledger_entries_task_idx;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_pkey PRIMARY KEY (task_id, id);

ALTER TABLE artifacts DROP CONSTRAINT artifacts_pkey;
DROP INDEX artifacts_task_idx;
ALTER TABLE artifacts ADD CONSTRAINT artifacts_pkey PRIMARY KEY (task_id, id);

-- A step's commit rewrites its task's row (the checkpoint). When the row's page has no room for
-- the new version, the update is not HOT and every index of `tasks` (five, for a running task)
-- gets an entry for it: about half of the updates in that run. Room left in each page at
-- insert lets the next versions stay on their page; pruning frees the dead ones as it goes.
ALTER TABLE tasks SET (fillfactor = 50);
