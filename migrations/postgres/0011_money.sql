-- Money as a budget unit: a task's money cap in micro-units of the operator's currency (NULL:
-- no cap; the spend is still counted), and `cost` as a ledger unit beside the other three.
-- Embedded by crates/cairn/src/store/postgres/schema.rs.
ALTER TABLE tasks ADD COLUMN budget_cost bigint CHECK (budget_cost IS NULL OR budget_cost > 0);
ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_unit_check;
ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_unit_check
    CHECK (unit IN ('tokens', 'tool_calls', 'wall_ms', 'cost'));
