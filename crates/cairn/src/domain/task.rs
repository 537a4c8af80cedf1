//! Tasks: a goal with a budget, a strategy and a lifecycle.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

pub type TaskId = Uuid;

/// The tenant of dev mode (no API key in the store, or `CAIRN_AUTH=off`) and of the tasks the
/// evaluation creates itself; otherwise a task belongs to the tenant of the key that created it.
pub const DEFAULT_TENANT: &str = "default";

/// Metadata key of a shadow copy: the id of the task it copies (a shadow run).
pub const SHADOW_OF: &str = "shadow_of";

/// Where a task is in its life. Terminal statuses never change again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Waiting for a worker to claim it (new, released at shutdown, or requeued by the reaper).
    Queued,
    /// Claimed by a worker holding a live lease.
    Running,
    /// Waiting for a person's decision on an approval request: no worker holds it, and the
    /// wait counts toward neither its wall-clock budget nor its tenant's running tasks.
    AwaitingApproval,
    Succeeded,
    Failed,
    /// Stopped because the ledger's reserve ran dry while a milestone still failed.
    BudgetExhausted,
    Cancelled,
}

impl TaskStatus {
    pub const ALL: [TaskStatus; 7] = [
        TaskStatus::Queued,
        TaskStatus::Running,
        TaskStatus::AwaitingApproval,
        TaskStatus::Succeeded,
        TaskStatus::Failed,
        TaskStatus::BudgetExhausted,
        TaskStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Queued => "queued",
            TaskStatus::Running => "running",
            TaskStatus::AwaitingApproval => "awaiting_approval",
            TaskStatus::Succeeded => "succeeded",
            TaskStatus::Failed => "failed",
            TaskStatus::BudgetExhausted => "budget_exhausted",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<TaskStatus> {
        Self::ALL.into_iter().find(|status| status.as_str() == text)
    }

    pub fn is_terminal(self) -> bool {
        !matches!(
            self,
            TaskStatus::Queued | TaskStatus::Running | TaskStatus::AwaitingApproval
        )
    }
}

/// Characters that print as nothing: zero-width spaces and joiners, the word joiner, the byte
/// order mark, the soft hyphen, the Mongolian vowel separator.
pub const INVISIBLE: [char; 7] = [
    '\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{FEFF}', '\u{00AD}', '\u{180E}',
];

/// A text with nothing a reader could see (a goal, a message): whitespace, control and
/// invisible characters only.
pub fn is_blank(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_whitespace() || c.is_control() || INVISIBLE.contains(&c))
}

/// How a task is run. `auto` lets the gate (and the rollout) decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    Direct,
    OneShot,
    Reactive,
    V1,
    V2,
    #[default]
    Auto,
}

impl Strategy {
    /// Whether a person's messages steer a task of this strategy: only cairn's planner takes
    /// them (the baselines are the comparison and run as they were written).
    pub fn takes_messages(self) -> bool {
        matches!(self, Strategy::V2 | Strategy::Direct | Strategy::Auto)
    }

    pub const ALL: [Strategy; 6] = [
        Strategy::Direct,
        Strategy::OneShot,
        Strategy::Reactive,
        Strategy::V1,
        Strategy::V2,
        Strategy::Auto,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Direct => "direct",
            Strategy::OneShot => "one_shot",
            Strategy::Reactive => "reactive",
            Strategy::V1 => "v1",
            Strategy::V2 => "v2",
            Strategy::Auto => "auto",
        }
    }

    pub fn parse(text: &str) -> Option<Strategy> {
        Self::ALL
            .into_iter()
            .find(|strategy| strategy.as_str() == text)
    }
}

/// A task's total budget, one figure per ledger unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Model tokens (prompt + completion).
    #[schema(minimum = 1, maximum = 1_000_000_000)]
    #[serde(deserialize_with = "crate::domain::whole::unsigned")]
    pub tokens: u64,
    /// Tool invocations.
    #[schema(minimum = 1, maximum = 1_000_000)]
    #[serde(deserialize_with = "crate::domain::whole::unsigned")]
    pub tool_calls: u64,
    /// Wall-clock milliseconds.
    #[schema(minimum = 1, maximum = 2_592_000_000_u64)]
    #[serde(deserialize_with = "crate::domain::whole::unsigned")]
    pub wall_ms: u64,
    /// Money, in micro-units of the operator's currency (`[prices]`, docs/configuration.md):
    /// 1,000,000 is one unit. Absent: no money cap; the spend is still counted and reported.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_u64)]
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::domain::whole::optional"
    )]
    pub cost: Option<u64>,
}

/// A budget as a submitter gives it: any unit left out (or `null`) is the operator's default
/// budget's (`default_budget`, docs/configuration.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetRequest {
    /// Model tokens (prompt + completion).
    #[schema(minimum = 1, maximum = 1_000_000_000)]
    #[serde(default, deserialize_with = "crate::domain::whole::optional")]
    pub tokens: Option<u64>,
    /// Tool invocations.
    #[schema(minimum = 1, maximum = 1_000_000)]
    #[serde(default, deserialize_with = "crate::domain::whole::optional")]
    pub tool_calls: Option<u64>,
    /// Wall-clock milliseconds.
    #[schema(minimum = 1, maximum = 2_592_000_000_u64)]
    #[serde(default, deserialize_with = "crate::domain::whole::optional")]
    pub wall_ms: Option<u64>,
    /// Money, in micro-units of the operator's currency; left out: the default budget's cap,
    /// if it has one.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_u64)]
    #[serde(default, deserialize_with = "crate::domain::whole::optional")]
    pub cost: Option<u64>,
}

impl BudgetRequest {
    /// The budget the task gets: the given units, `default`'s for the others.
    pub fn over(self, default: Budget) -> Budget {
        Budget {
            tokens: self.tokens.unwrap_or(default.tokens),
            tool_calls: self.tool_calls.unwrap_or(default.tool_calls),
            wall_ms: self.wall_ms.unwrap_or(default.wall_ms),
            cost: self.cost.or(default.cost),
        }
    }
}

/// `deserialize_with` for a configured budget: the units given, [`Budget::DEFAULT`]'s for the
/// others.
pub fn budget_over_default<'de, D>(deserializer: D) -> Result<Budget, D::Error>
where
    D: serde::Deserializer<'de>,
{
    BudgetRequest::deserialize(deserializer).map(|given| given.over(Budget::DEFAULT))
}

impl From<Budget> for BudgetRequest {
    fn from(budget: Budget) -> Self {
        Self {
            tokens: Some(budget.tokens),
            tool_calls: Some(budget.tool_calls),
            wall_ms: Some(budget.wall_ms),
            cost: budget.cost,
        }
    }
}

impl Budget {
    /// The budget of a task submitted without one, unless the operator sets another: room for a
    /// plan of a few milestones on a hosted model, and a quarter of an hour.
    pub const DEFAULT: Budget = Budget {
        tokens: 200_000,
        tool_calls: 50,
        wall_ms: 900_000,
        cost: None,
    };
}

/// Upper bounds that separate a generous budget from a typo.
pub const MAX_TOKENS: u64 = 1_000_000_000;
pub const MAX_TOOL_CALLS: u64 = 1_000_000;
pub const MAX_WALL_MS: u64 = 30 * 24 * 3600 * 1000;
/// A million units of currency, in micro-units.
pub const MAX_COST: u64 = 1_000_000_000_000;

impl Budget {
    /// Every unit must be positive and below its absurdity bound.
    /// Returns one message per offending unit.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut errors = Vec::new();
        for (name, value, max) in [
            ("tokens", self.tokens, MAX_TOKENS),
            ("tool_calls", self.tool_calls, MAX_TOOL_CALLS),
            ("wall_ms", self.wall_ms, MAX_WALL_MS),
        ]
        .into_iter()
        .chain(self.cost.map(|cost| ("cost", cost, MAX_COST)))
        {
            if value == 0 {
                errors.push(format!("budget.{name} must be greater than 0"));
            } else if value > max {
                errors.push(format!("budget.{name} must be at most {max}, got {value}"));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

/// A task as stored and as returned by the API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Task {
    pub id: Uuid,
    pub tenant_id: String,
    pub goal: String,
    pub strategy: Strategy,
    pub budget: Budget,
    #[schema(value_type = Object)]
    pub metadata: Value,
    pub status: TaskStatus,
    #[serde(serialize_with = "crate::domain::instant::millis")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::domain::instant::millis")]
    pub updated_at: DateTime<Utc>,
    /// When a worker first claimed the task.
    #[serde(serialize_with = "crate::domain::instant::millis_opt")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(serialize_with = "crate::domain::instant::millis_opt")]
    pub finished_at: Option<DateTime<Utc>>,
    /// The latest plan version, if the task has been planned.
    pub plan_version: Option<i32>,
    /// The final report once the task is terminal.
    #[schema(value_type = Option<Object>)]
    pub result: Option<Value>,
    /// How many times a worker has claimed the task (more than one means it was resumed).
    pub attempts: i32,
    /// The sequence number of the task's latest event.
    pub last_seq: i64,
    /// The registered tools the task may use, when its submitter narrowed them; absent, every
    /// registered tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// What the submitter asked to sign off (`none` unless asked; the operator's policy may
    /// ask for more).
    #[serde(default)]
    pub approval: crate::domain::approval::ApprovalMode,
    /// How far the task has come, as of its last commit: milestones done of the plan's, the
    /// ones under way, spend so far per unit. On `GET /v1/tasks/{id}` once a worker has
    /// checkpointed the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<crate::domain::progress::Progress>,
}

/// What the API hands the store to create a task.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    pub id: Uuid,
    pub tenant_id: String,
    pub goal: String,
    pub strategy: Strategy,
    pub budget: Budget,
    pub metadata: Value,
    /// The registered tools the task may use; `None`, every one.
    pub tools: Option<Vec<String>>,
    /// What the submitter asked to sign off.
    pub approval: crate::domain::approval::ApprovalMode,
}

/// The proof that a worker owns a task: who claimed it and with which fence.
/// Every write a worker makes is conditioned on both still matching the row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub task_id: TaskId,
    pub worker_id: String,
    pub fence: i64,
}
