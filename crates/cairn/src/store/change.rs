//! What a worker's writes carry: the claim it starts from, the change it commits under its
//! lease, and what the commit answers.

use serde::Serialize;
use serde_json::Value;

use super::{NewArtifact, NewLedgerEntry, NewPlanVersion};
use crate::domain::event::NewEvent;
use crate::domain::task::{Lease, Task, TaskStatus};

/// A task a worker just claimed, with its lease and the engine's last checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed {
    pub task: Task,
    pub lease: Lease,
    pub state: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseStatus {
    Held,
    Lost,
}

/// The engine's checkpoint as JSON text. The engine serializes its state once, straight to
/// text (no [`Value`] tree on the way), and the stores keep the text as it is (Postgres `text`,
/// SQLite `TEXT`); the next claim parses it back ([`Claimed::state`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateJson(String);

impl StateJson {
    pub fn of<T: Serialize + ?Sized>(state: &T) -> Result<Self, serde_json::Error> {
        serde_json::to_string(state).map(Self)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Everything one fenced worker write changes, committed in one transaction.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Change {
    /// New status. A terminal status also sets `finished_at` and releases the lease.
    pub status: Option<TaskStatus>,
    /// The task's final report (set with a terminal status).
    pub result: Option<Value>,
    /// The engine's checkpoint, read back by the next claim.
    pub state: Option<StateJson>,
    /// A new immutable plan version; also becomes the task's current `plan_version`.
    pub plan_version: Option<NewPlanVersion>,
    pub events: Vec<NewEvent>,
    pub ledger: Vec<NewLedgerEntry>,
    pub artifacts: Vec<NewArtifact>,
    /// Clear the lease (with `status: Some(Queued)` this hands the task back at shutdown).
    pub release: bool,
    /// No claim takes the task before this time (set with a release: a task whose next call
    /// its tenant's spend cap cannot cover waits for the next period). Every commit writes it,
    /// so `None` makes the task claimable at once.
    pub not_before: Option<chrono::DateTime<chrono::Utc>>,
}

impl Change {
    /// The money charged by this change's ledger entries: what its tenant's spend grows by.
    pub fn charged_cost(&self) -> i64 {
        self.ledger
            .iter()
            .filter(|entry| entry.unit == "cost" && entry.kind == "charge" && entry.amount > 0)
            .map(|entry| entry.amount)
            .fold(0i64, i64::saturating_add)
    }

    /// The part of [`Change::charged_cost`] booked from estimates: the `cost` of its
    /// `ledger.estimated` events (model calls whose endpoint reported no usage).
    pub fn estimated_cost(&self) -> i64 {
        self.events
            .iter()
            .filter(|event| event.kind == crate::domain::event::kinds::LEDGER_ESTIMATED)
            .filter_map(|event| event.data["cost"].as_i64())
            .fold(0i64, i64::saturating_add)
    }
}

/// The outcome of a fenced write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Applied; the events got `seq` values `first_seq..=last_seq` (empty when no events).
    Applied { first_seq: i64, last_seq: i64 },
    /// The lease was lost (expired and reclaimed, or the task was cancelled): nothing written.
    LeaseLost,
}
