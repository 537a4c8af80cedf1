//! How far a task has come, as `GET /v1/tasks/{id}` shows it while the task runs.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Where a task stands in the v2 flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    #[default]
    Gate,
    Direct,
    Plan,
    Execute,
    Verify,
}

/// Spend per unit as the API shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct SpendView {
    /// Model tokens (prompt + completion).
    pub tokens: u64,
    /// Tool invocations.
    pub tool_calls: u64,
    /// Wall-clock milliseconds.
    pub wall_ms: u64,
    /// Money in micro-units of the operator's currency (`[prices]`); 0 where nothing is priced.
    #[serde(default)]
    pub cost: u64,
}

/// A milestone under way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CurrentMilestone {
    pub id: String,
    pub title: String,
}

/// How far a task has come, as of its last commit: read from the engine's checkpoint, so a
/// running task shows it (`Task.progress`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, ToSchema)]
pub struct Progress {
    /// Gate, direct (acting without a plan), plan, execute or verify.
    pub phase: Phase,
    /// Milestones of the current plan that passed their checks.
    pub milestones_done: u32,
    /// Milestones in the current plan (0 before there is one, and on the direct route).
    pub milestones_total: u32,
    /// The milestones under way now (several when independent ones run side by side).
    pub current: Vec<CurrentMilestone>,
    /// Steps (tool calls the engine planned) that completed so far.
    pub steps_completed: u32,
    /// Everything charged so far, per unit.
    pub spent: SpendView,
}
