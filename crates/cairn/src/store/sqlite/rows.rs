//! Conversions between cairn's types and SQLite's storage classes.
//!
//! SQLite has no timestamp, uuid or JSON type, so this file fixes one encoding for each and is
//! the only place that knows it: times are INTEGER milliseconds since the epoch (exact
//! comparisons for leases), uuids are lowercase hyphenated TEXT (lexical order = UUIDv7 time
//! order, which keyset pagination relies on), JSON is TEXT. Anything that does not decode is
//! [`StoreError::Corrupt`] rather than a panic.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;
use uuid::Uuid;

use crate::domain::event::Event;
use crate::domain::task::{Budget, Task};
use crate::store::rules;
use crate::store::{Artifact, LedgerEntry, PlanVersionRecord, StoreError, ToolReceipt};

/// The columns [`task_from_row`] reads, in a form `concat!` can splice into static SQL.
macro_rules! task_columns {
    () => {
        "id, tenant_id, goal, strategy, budget_tokens, budget_tool_calls, budget_wall_ms, \
         metadata, status, created_at, updated_at, started_at, finished_at, plan_version, \
         result, attempts, last_seq, tools, approval, budget_cost"
    };
}
pub(super) use task_columns;

pub(super) fn millis(time: DateTime<Utc>) -> i64 {
    time.timestamp_millis()
}

pub(super) fn from_millis(ms: i64) -> Result<DateTime<Utc>, StoreError> {
    DateTime::from_timestamp_millis(ms)
        .ok_or_else(|| StoreError::Corrupt(format!("timestamp out of range: {ms}")))
}

pub(super) fn opt_from_millis(ms: Option<i64>) -> Result<Option<DateTime<Utc>>, StoreError> {
    ms.map(from_millis).transpose()
}

/// The TEXT form of a uuid: lowercase and hyphenated.
pub(super) fn id_text(id: Uuid) -> String {
    id.hyphenated().to_string()
}

pub(super) fn parse_id(text: &str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(text).map_err(|err| StoreError::Corrupt(format!("bad uuid {text:?}: {err}")))
}

pub(super) fn json_text(value: &Value) -> String {
    value.to_string()
}

/// Budgets are validated far below `i64::MAX` before they reach the store; a value that does not
/// fit is refused rather than wrapped.
pub(super) fn budget_int(unit: &str, value: u64) -> Result<i64, StoreError> {
    i64::try_from(value)
        .map_err(|_| StoreError::Corrupt(format!("budget.{unit} {value} does not fit in i64")))
}

fn budget_unit(row: &SqliteRow, column: &str) -> Result<u64, StoreError> {
    let value: i64 = row.try_get(column)?;
    u64::try_from(value).map_err(|_| StoreError::Corrupt(format!("negative {column}: {value}")))
}

fn small_int(column: &str, value: i64) -> Result<i32, StoreError> {
    i32::try_from(value).map_err(|_| StoreError::Corrupt(format!("{column} out of range: {value}")))
}

pub(super) fn task_from_row(row: &SqliteRow) -> Result<Task, StoreError> {
    let strategy: String = row.try_get("strategy")?;
    let status: String = row.try_get("status")?;
    let metadata: String = row.try_get("metadata")?;
    let result: Option<String> = row.try_get("result")?;
    let plan_version: Option<i64> = row.try_get("plan_version")?;
    Ok(Task {
        id: parse_id(&row.try_get::<String, _>("id")?)?,
        tenant_id: row.try_get("tenant_id")?,
        goal: row.try_get("goal")?,
        strategy: rules::stored_strategy(&strategy)?,
        budget: Budget {
            tokens: budget_unit(row, "budget_tokens")?,
            tool_calls: budget_unit(row, "budget_tool_calls")?,
            wall_ms: budget_unit(row, "budget_wall_ms")?,
            cost: row
                .try_get::<Option<i64>, _>("budget_cost")?
                .map(|cost| {
                    u64::try_from(cost)
                        .map_err(|_| StoreError::Corrupt(format!("negative budget_cost: {cost}")))
                })
                .transpose()?,
        },
        metadata: rules::parse_json("metadata", &metadata)?,
        status: rules::stored_status(&status)?,
        created_at: from_millis(row.try_get("created_at")?)?,
        updated_at: from_millis(row.try_get("updated_at")?)?,
        started_at: opt_from_millis(row.try_get("started_at")?)?,
        finished_at: opt_from_millis(row.try_get("finished_at")?)?,
        plan_version: plan_version
            .map(|v| small_int("plan_version", v))
            .transpose()?,
        result: result
            .map(|text| rules::parse_json("result", &text))
            .transpose()?,
        attempts: small_int("attempts", row.try_get("attempts")?)?,
        tools: rules::stored_tools(row.try_get("tools")?)?,
        approval: rules::stored_approval(&row.try_get::<String, _>("approval")?)?,
        progress: None,
        last_seq: row.try_get("last_seq")?,
    })
}

/// Decodes an optional JSON column (the engine checkpoint).
pub(super) fn opt_json(row: &SqliteRow, column: &str) -> Result<Option<Value>, StoreError> {
    let text: Option<String> = row.try_get(column)?;
    text.map(|text| rules::parse_json(column, &text))
        .transpose()
}

pub(super) fn event_from_row(row: &SqliteRow) -> Result<Event, StoreError> {
    Ok(Event {
        task_id: parse_id(&row.try_get::<String, _>("task_id")?)?,
        seq: row.try_get("seq")?,
        kind: row.try_get("kind")?,
        data: rules::parse_json("data", &row.try_get::<String, _>("data")?)?,
        created_at: from_millis(row.try_get("created_at")?)?,
    })
}

pub(super) fn plan_version_from_row(row: &SqliteRow) -> Result<PlanVersionRecord, StoreError> {
    Ok(PlanVersionRecord {
        task_id: parse_id(&row.try_get::<String, _>("task_id")?)?,
        version: small_int("version", row.try_get("version")?)?,
        reason: row.try_get("reason")?,
        caused_by_seq: row.try_get("caused_by_seq")?,
        plan: rules::parse_json("plan", &row.try_get::<String, _>("plan")?)?,
        created_at: from_millis(row.try_get("created_at")?)?,
    })
}

pub(super) fn ledger_entry_from_row(row: &SqliteRow) -> Result<LedgerEntry, StoreError> {
    Ok(LedgerEntry {
        id: row.try_get("id")?,
        task_id: parse_id(&row.try_get::<String, _>("task_id")?)?,
        milestone_id: row.try_get("milestone_id")?,
        kind: row.try_get("kind")?,
        unit: row.try_get("unit")?,
        amount: row.try_get("amount")?,
        created_at: from_millis(row.try_get("created_at")?)?,
    })
}

pub(super) fn artifact_from_row(row: &SqliteRow) -> Result<Artifact, StoreError> {
    Ok(Artifact {
        task_id: parse_id(&row.try_get::<String, _>("task_id")?)?,
        milestone_id: row.try_get("milestone_id")?,
        name: row.try_get("name")?,
        value: rules::parse_json("value", &row.try_get::<String, _>("value")?)?,
        created_at: from_millis(row.try_get("created_at")?)?,
    })
}

pub(super) fn receipt_from_row(row: &SqliteRow) -> Result<ToolReceipt, StoreError> {
    Ok(ToolReceipt {
        idempotency_key: row.try_get("idempotency_key")?,
        task_id: parse_id(&row.try_get::<String, _>("task_id")?)?,
        tool: row.try_get("tool")?,
        response: rules::parse_json("response", &row.try_get::<String, _>("response")?)?,
        created_at: from_millis(row.try_get("created_at")?)?,
    })
}
