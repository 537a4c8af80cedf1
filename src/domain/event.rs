//! Events: the append-only history of a task, one row per transition.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// One stored event. `seq` is per task, starts at 1, has no gaps, and is the SSE `id:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Event {
    pub task_id: uuid::Uuid,
    pub seq: i64,
    pub kind: String,
    #[schema(value_type = Object)]
    pub data: Value,
    pub created_at: DateTime<Utc>,
}

/// An event about to be appended; the store assigns `seq` and `created_at`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub kind: String,
    pub data: Value,
}

impl NewEvent {
    pub fn new(kind: impl Into<String>, data: Value) -> Self {
        Self {
            kind: kind.into(),
            data,
        }
    }
}

/// Event kinds written by the foundation. Engine and repair kinds live beside their writers
/// and follow the same `noun.verb` form.
pub mod kinds {
    pub const TASK_CREATED: &str = "task.created";
    pub const TASK_CLAIMED: &str = "task.claimed";
    pub const TASK_RELEASED: &str = "task.released";
    pub const TASK_LEASE_EXPIRED: &str = "task.lease_expired";
    pub const TASK_SUCCEEDED: &str = "task.succeeded";
    pub const TASK_FAILED: &str = "task.failed";
    pub const TASK_BUDGET_EXHAUSTED: &str = "task.budget_exhausted";
    pub const TASK_CANCELLED: &str = "task.cancelled";
    pub const ENGINE_STEP: &str = "engine.step";
    pub const PLAN_VERSIONED: &str = "plan.versioned";

    /// Kinds after which a task never changes again: SSE streams end after one of them.
    pub const TERMINAL: [&str; 4] = [
        TASK_SUCCEEDED,
        TASK_FAILED,
        TASK_BUDGET_EXHAUSTED,
        TASK_CANCELLED,
    ];

    pub fn is_terminal(kind: &str) -> bool {
        TERMINAL.contains(&kind)
    }

    /// The terminal event kind for a terminal status.
    pub fn for_terminal_status(status: super::super::task::TaskStatus) -> Option<&'static str> {
        use super::super::task::TaskStatus;
        match status {
            TaskStatus::Succeeded => Some(TASK_SUCCEEDED),
            TaskStatus::Failed => Some(TASK_FAILED),
            TaskStatus::BudgetExhausted => Some(TASK_BUDGET_EXHAUSTED),
            TaskStatus::Cancelled => Some(TASK_CANCELLED),
            TaskStatus::Queued | TaskStatus::Running => None,
        }
    }
}
