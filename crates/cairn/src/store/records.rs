//! The append-only records a task accumulates (plan versions, ledger entries, artifacts) and
//! the tool receipts, as stored and as written.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// An immutable plan snapshot as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PlanVersionRecord {
    pub task_id: uuid::Uuid,
    pub version: i32,
    /// Why this version was written (`initial`, a replan reason, a repair level).
    pub reason: String,
    /// The `seq` of the event that caused this version, if any.
    pub caused_by_seq: Option<i64>,
    #[schema(value_type = Object)]
    pub plan: Value,
    #[serde(serialize_with = "crate::domain::instant::millis")]
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewPlanVersion {
    pub version: i32,
    pub reason: String,
    pub caused_by_seq: Option<i64>,
    pub plan: Value,
}

/// One ledger movement. The ledger of a task is derivable from its entries alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct LedgerEntry {
    pub id: i64,
    pub task_id: uuid::Uuid,
    /// `None` for task-level movements (the reserve).
    pub milestone_id: Option<String>,
    /// `allocate`, `charge`, `grant`, `return`, `reserve`.
    pub kind: String,
    /// `tokens`, `tool_calls` or `wall_ms`.
    pub unit: String,
    pub amount: i64,
    #[serde(serialize_with = "crate::domain::instant::millis")]
    pub created_at: DateTime<Utc>,
}

/// What one tenant's tasks were charged in money in one hour (UTC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendHour {
    pub tenant_id: String,
    /// The hour's start.
    pub hour: DateTime<Utc>,
    /// Micro-units of the price table's currency.
    pub cost: u64,
    /// The part of `cost` booked from estimates (calls whose endpoint reported no usage).
    pub estimated_cost: u64,
}

impl SpendHour {
    /// The money `hours` hold in all.
    pub fn total<'a>(hours: impl IntoIterator<Item = &'a SpendHour>) -> u64 {
        hours
            .into_iter()
            .fold(0u64, |sum, hour| sum.saturating_add(hour.cost))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewLedgerEntry {
    pub milestone_id: Option<String>,
    pub kind: String,
    pub unit: String,
    pub amount: i64,
}

/// A named output of a milestone, kept for later milestones and for checks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Artifact {
    pub task_id: uuid::Uuid,
    pub milestone_id: String,
    pub name: String,
    /// Any JSON value: what the tool returned under that name.
    #[schema(value_type = Value)]
    pub value: Value,
    #[serde(serialize_with = "crate::domain::instant::millis")]
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewArtifact {
    pub milestone_id: String,
    pub name: String,
    pub value: Value,
}

/// The stored result of a side-effecting tool call, keyed by its idempotency key, so that a
/// resumed step returns the stored result instead of calling the tool again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolReceipt {
    pub idempotency_key: String,
    pub task_id: uuid::Uuid,
    pub tool: String,
    pub response: Value,
    #[serde(serialize_with = "crate::domain::instant::millis")]
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewToolReceipt {
    pub idempotency_key: String,
    pub task_id: uuid::Uuid,
    pub tool: String,
    pub response: Value,
}
