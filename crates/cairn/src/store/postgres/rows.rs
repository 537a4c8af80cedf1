//! Row <-> domain mapping for the Postgres store.
//!
//! Kept in one place so that every query returning a task selects the same columns and every
//! decoding failure (an unknown status, a negative budget) surfaces as [`StoreError::Corrupt`]
//! instead of a panic.

use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::domain::event::Event;
use crate::domain::task::{Budget, Task};
use crate::store::rules;
use crate::store::{Artifact, LedgerEntry, PlanVersionRecord, StoreError, ToolReceipt};

/// The columns [`task`] reads, for `SELECT` and `RETURNING` lists. A macro rather than a
/// `const` so it can be spliced into `concat!`: every query stays a `&'static str`, which is
/// how sqlx 0.9 tells a fixed statement from an interpolated one.
macro_rules! task_columns {
    () => {
        "id, tenant_id, goal, strategy, budget_tokens, budget_tool_calls, budget_wall_ms, \
         metadata, status, created_at, updated_at, started_at, finished_at, plan_version, \
         result, attempts, last_seq, tools, approval, budget_cost"
    };
}
pub(super) use task_columns;

pub(super) fn task(row: &PgRow) -> Result<Task, StoreError> {
    let strategy: String = row.try_get("strategy")?;
    let status: String = row.try_get("status")?;
    Ok(Task {
        id: row.try_get("id")?,
        tenant_id: row.try_get("tenant_id")?,
        goal: row.try_get("goal")?,
        strategy: rules::stored_strategy(&strategy)?,
        budget: Budget {
            tokens: unsigned(row.try_get("budget_tokens")?, "budget_tokens")?,
            tool_calls: unsigned(row.try_get("budget_tool_calls")?, "budget_tool_calls")?,
            wall_ms: unsigned(row.try_get("budget_wall_ms")?, "budget_wall_ms")?,
            cost: row
                .try_get::<Option<i64>, _>("budget_cost")?
                .map(|cost| unsigned(cost, "budget_cost"))
                .transpose()?,
        },
        metadata: row.try_get("metadata")?,
        status: rules::stored_status(&status)?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
        plan_version: row.try_get("plan_version")?,
        result: row.try_get("result")?,
        attempts: row.try_get("attempts")?,
        last_seq: row.try_get("last_seq")?,
        tools: rules::stored_tools(row.try_get("tools")?)?,
        approval: rules::stored_approval(&row.try_get::<String, _>("approval")?)?,
        progress: None,
    })
}

fn unsigned(value: i64, column: &str) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt(format!("{column} is negative: {value}")))
}

/// Budget figures are `u64` in the domain and `bigint` in the table.
pub(super) fn bigint(value: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(value)
        .map_err(|_| StoreError::Corrupt(format!("{what} = {value} does not fit in a bigint")))
}

pub(super) fn event(row: &PgRow) -> Result<Event, StoreError> {
    Ok(Event {
        task_id: row.try_get("task_id")?,
        seq: row.try_get("seq")?,
        kind: row.try_get("kind")?,
        data: rules::parse_json("data", row.try_get::<&str, _>("data")?)?,
        created_at: row.try_get("created_at")?,
    })
}

pub(super) fn plan_version(row: &PgRow) -> Result<PlanVersionRecord, StoreError> {
    Ok(PlanVersionRecord {
        task_id: row.try_get("task_id")?,
        version: row.try_get("version")?,
        reason: row.try_get("reason")?,
        caused_by_seq: row.try_get("caused_by_seq")?,
        plan: row.try_get("plan")?,
        created_at: row.try_get("created_at")?,
    })
}

pub(super) fn ledger_entry(row: &PgRow) -> Result<LedgerEntry, StoreError> {
    Ok(LedgerEntry {
        id: row.try_get("id")?,
        task_id: row.try_get("task_id")?,
        milestone_id: row.try_get("milestone_id")?,
        kind: row.try_get("kind")?,
        unit: row.try_get("unit")?,
        amount: row.try_get("amount")?,
        created_at: row.try_get("created_at")?,
    })
}

pub(super) fn artifact(row: &PgRow) -> Result<Artifact, StoreError> {
    Ok(Artifact {
        task_id: row.try_get("task_id")?,
        milestone_id: row.try_get("milestone_id")?,
        name: row.try_get("name")?,
        value: row.try_get("value")?,
        created_at: row.try_get("created_at")?,
    })
}

pub(super) fn receipt(row: &PgRow) -> Result<ToolReceipt, StoreError> {
    Ok(ToolReceipt {
        idempotency_key: row.try_get("idempotency_key")?,
        task_id: row.try_get("task_id")?,
        tool: row.try_get("tool")?,
        response: row.try_get("response")?,
        created_at: row.try_get("created_at")?,
    })
}
