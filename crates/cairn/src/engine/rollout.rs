//! Gated rollout of v2: a configurable percentage of `auto` tasks runs on v2, the rest on the
//! incumbent v1 planner, and raising the percentage is refused while the latest evaluation
//! report shows a regression: every regression is reviewed before the rollout grows, step by
//! step (docs/evaluation.md, "Rollout").
//!
//! - **Sticky by task id:** a task's bucket is a hash of its id (0..100); it runs on v2 when the
//!   bucket is below the percentage. The same task always lands in the same bucket, and a
//!   resumed task keeps the engine its checkpoint belongs to even if the percentage moved.
//! - **Gate on evidence:** raising reads `rollout_regressions` (tasks v1 solved and the
//!   candidate did not; `v2_regressions` in reports without it) from the evaluation report
//!   (`report.json` written by `cairn eval`, path `CAIRN_EVAL_REPORT`). A missing or unreadable
//!   report refuses too: no evidence is not a clean bill. Lowering is always allowed.
//! - The split counters are this process's (each replica reports its own routing).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::domain::task::{Strategy, TaskId};

/// Which engine an `auto` task runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Arm {
    V2,
    V1,
}

impl Arm {
    pub fn strategy(self) -> Strategy {
        match self {
            Arm::V2 => Strategy::V2,
            Arm::V1 => Strategy::V1,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RolloutError {
    #[error("percent must be 0..=100, got {0}")]
    OutOfRange(u32),
    #[error("the latest evaluation shows v2 regressions on: {}", .tasks.join(", "))]
    Regression { tasks: Vec<String> },
    #[error("no readable evaluation report: {0}")]
    NoEvaluation(String),
}

/// What `GET /v1/rollout` and `GET /v1/stats` show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RolloutSplit {
    /// Share of `auto` tasks that run on v2, 0..=100.
    pub percent: u8,
    /// `auto` tasks this process routed to v2 and to v1.
    pub routed_v2: u64,
    pub routed_v1: u64,
    /// The evaluation report raising is checked against.
    pub eval_report: Option<String>,
}

/// The rollout setting, shared by the engine dispatcher and the HTTP API.
#[derive(Debug)]
pub struct Rollout {
    percent: AtomicU8,
    report: Option<PathBuf>,
    routed_v2: AtomicU64,
    routed_v1: AtomicU64,
}

impl Default for Rollout {
    /// Everything on v2, as `cairn serve` ran before rollout existed.
    fn default() -> Self {
        Rollout::new(100, None)
    }
}

impl Rollout {
    pub fn new(percent: u8, report: Option<PathBuf>) -> Rollout {
        Rollout {
            percent: AtomicU8::new(percent.min(100)),
            report,
            routed_v2: AtomicU64::new(0),
            routed_v1: AtomicU64::new(0),
        }
    }

    pub fn percent(&self) -> u8 {
        self.percent.load(Ordering::SeqCst)
    }

    /// The task's bucket, 0..100, from a hash of its id.
    pub fn bucket(task: TaskId) -> u8 {
        let digest = Sha256::digest(task.as_bytes());
        let value = u16::from_be_bytes([digest[0], digest[1]]);
        u8::try_from(value % 100).unwrap_or(0)
    }

    /// The arm of a task at the current percentage (pure: no counting).
    pub fn arm(&self, task: TaskId) -> Arm {
        if Self::bucket(task) < self.percent() {
            Arm::V2
        } else {
            Arm::V1
        }
    }

    /// Routes an `auto` task: the arm of the engine its checkpoint is tagged with when it is
    /// resumed (`resumed`), its bucket's arm otherwise; counts the decision.
    pub fn route(&self, task: TaskId, resumed: Option<Arm>) -> Arm {
        let arm = resumed.unwrap_or_else(|| self.arm(task));
        let counter = match arm {
            Arm::V2 => &self.routed_v2,
            Arm::V1 => &self.routed_v1,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        arm
    }

    /// Sets the percentage; raising it needs a report without v2 regressions.
    pub fn set(&self, percent: u32) -> Result<RolloutSplit, RolloutError> {
        let wanted = u8::try_from(percent)
            .ok()
            .filter(|p| *p <= 100)
            .ok_or(RolloutError::OutOfRange(percent))?;
        if wanted > self.percent() {
            let path = self
                .report
                .as_deref()
                .ok_or_else(|| RolloutError::NoEvaluation("CAIRN_EVAL_REPORT is not set".into()))?;
            let tasks = v2_regressions(path)?;
            if !tasks.is_empty() {
                return Err(RolloutError::Regression { tasks });
            }
        }
        self.percent.store(wanted, Ordering::SeqCst);
        tracing::info!(percent = wanted, "rollout percentage changed");
        Ok(self.split())
    }

    pub fn split(&self) -> RolloutSplit {
        RolloutSplit {
            percent: self.percent(),
            routed_v2: self.routed_v2.load(Ordering::Relaxed),
            routed_v1: self.routed_v1.load(Ordering::Relaxed),
            eval_report: self.report.as_ref().map(|p| p.display().to_string()),
        }
    }
}

/// The regressions that block a rollout increase, from a `cairn eval` report: its
/// `rollout_regressions` (tasks v1 solved and the candidate did not) when present, else its
/// `v2_regressions` (tasks any strategy solved and v2 did not).
pub fn v2_regressions(path: &Path) -> Result<Vec<String>, RolloutError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| RolloutError::NoEvaluation(format!("{}: {e}", path.display())))?;
    let report: Value = serde_json::from_str(&text)
        .map_err(|e| RolloutError::NoEvaluation(format!("{}: {e}", path.display())))?;
    let list = report
        .get("rollout_regressions")
        .or_else(|| report.get("v2_regressions"))
        .and_then(Value::as_array)
        .ok_or_else(|| {
            RolloutError::NoEvaluation(format!("{}: no v2_regressions", path.display()))
        })?;
    Ok(list
        .iter()
        .map(|t| {
            t.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| t.to_string())
        })
        .collect())
}
