//! The rules both backends follow that do not depend on SQL, written once.
//!
//! A backend decides *how* to read and write rows; these functions decide *what* a write means:
//! the status and timestamps a [`Change`] implies, which tasks a cancel may touch and the event
//! it records, how a replayed idempotency key is answered, how a page size is bounded, which
//! wake-up hints follow a write, and how stored status and strategy names are decoded. Both
//! `postgres/` and `sqlite/` call them, so the conformance suite checks one rule rather than two
//! copies of it.

use std::ops::ControlFlow;

use serde_json::{Value, json};

use super::{
    CancelOutcome, Change, Commit, Created, IdempotencyClaim, LeaseStatus, StoreError, Wakeup,
};
use crate::domain::event::kinds;
use crate::domain::task::{Strategy, Task, TaskId, TaskStatus};

/// A JSON value stored as text (SQLite's JSON columns; Postgres's checkpoint and event
/// payloads), parsed back; text that is not JSON is a corrupt store, never a panic.
pub(crate) fn parse_json(column: &str, text: &str) -> Result<Value, StoreError> {
    serde_json::from_str(text)
        .map_err(|err| StoreError::Corrupt(format!("bad JSON in {column}: {err}")))
}

/// What a fenced commit does to the task row, beyond inserting the change's own rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CommitEffect {
    /// The status the task is left in.
    pub(crate) status: TaskStatus,
}

impl CommitEffect {
    /// A release (or an explicit `queued`) hands the task back to the queue: a task without a
    /// lease cannot be running, so releasing while keeping `running` requeues it. Without a new
    /// status and without a release the task stays `running`.
    pub(crate) fn of(change: &Change) -> Self {
        let status = match change.status {
            Some(status) if status != TaskStatus::Running => status,
            _ if change.release => TaskStatus::Queued,
            _ => TaskStatus::Running,
        };
        Self { status }
    }

    /// A terminal status stamps `finished_at` with the commit time.
    pub(crate) fn sets_finished_at(self) -> bool {
        self.status.is_terminal()
    }

    /// The lease (`claimed_by`, `lease_expires_at`) survives only while the task stays
    /// `running`; any other status clears it in the same statement.
    pub(crate) fn keeps_lease(self) -> bool {
        self.status == TaskStatus::Running
    }

    /// The outcome of an applied commit whose events end at `last_seq`, `events` of them.
    pub(crate) fn applied(last_seq: i64, events: i64) -> Commit {
        Commit::Applied {
            first_seq: last_seq - events + 1,
            last_seq,
        }
    }

    /// The hints after an applied commit: new events (when there were any), then a runnable
    /// task when the commit requeued it.
    pub(crate) fn wakeups(self, task_id: TaskId, last_seq: i64, events: i64) -> Vec<Wakeup> {
        let mut wakeups = Vec::with_capacity(2);
        if events > 0 {
            wakeups.push(Wakeup::Events { task_id, last_seq });
        }
        if self.status == TaskStatus::Queued {
            wakeups.push(Wakeup::TaskRunnable);
        }
        wakeups
    }
}

/// What cancel may touch: a missing task is [`CancelOutcome::NotFound`], a task that already
/// ended is [`CancelOutcome::AlreadyTerminal`] (nothing is written); a queued or running task
/// comes back (`Continue`) to be cancelled; otherwise the cancel stops (`Break`) with its
/// outcome. The backend's write then sets `cancelled`, `finished_at`, clears the lease and bumps
/// the fence, so a running worker's next write is `LeaseLost`.
pub(crate) fn cancellable(current: Option<Task>) -> ControlFlow<CancelOutcome, Task> {
    match current {
        None => ControlFlow::Break(CancelOutcome::NotFound),
        Some(task) if task.status.is_terminal() => {
            ControlFlow::Break(CancelOutcome::AlreadyTerminal(task))
        }
        Some(task) => ControlFlow::Continue(task),
    }
}

/// The kind of the event a cancel records.
pub(crate) const CANCELLED_EVENT: &str = kinds::TASK_CANCELLED;

/// The data of the `task.cancelled` event: the status the task was cancelled from.
pub(crate) fn cancelled_event(previous: TaskStatus, by: Option<&str>) -> Value {
    with_actor(json!({ "previous_status": previous }), by)
}

/// The data of a `task.created` event: what was asked for, and by whom when known.
pub(crate) fn created_event(new: &crate::domain::task::NewTask, by: Option<&str>) -> Value {
    let mut data = json!({ "goal": new.goal, "strategy": new.strategy, "budget": new.budget });
    if let (Some(tools), Some(object)) = (&new.tools, data.as_object_mut()) {
        object.insert("tools".into(), json!(tools));
    }
    with_actor(data, by)
}

/// A task's tool list as stored: JSON text, `None` (NULL) for every registered tool.
pub(crate) fn tools_text(tools: Option<&[String]>) -> Option<String> {
    tools.map(|names| json!(names).to_string())
}

/// A stored tool list read back.
pub(crate) fn stored_tools(text: Option<String>) -> Result<Option<Vec<String>>, StoreError> {
    text.map(|text| {
        serde_json::from_str(&text)
            .map_err(|e| StoreError::Corrupt(format!("tasks.tools is not a list of names: {e}")))
    })
    .transpose()
}

/// Adds `"by": key_id` (the audit trail: an API key id, never a secret).
fn with_actor(mut data: Value, by: Option<&str>) -> Value {
    if let (Some(by), Some(object)) = (by, data.as_object_mut()) {
        object.insert("by".into(), Value::String(by.to_string()));
    }
    data
}

/// The hints after a cancel: its one event.
pub(crate) fn cancelled_wakeups(task: &Task) -> Vec<Wakeup> {
    vec![Wakeup::Events {
        task_id: task.id,
        last_seq: task.last_seq,
    }]
}

/// The hints after a task is created: its `task.created` event, and a claimable task.
pub(crate) fn created_wakeups(task: &Task) -> Vec<Wakeup> {
    vec![
        Wakeup::Events {
            task_id: task.id,
            last_seq: task.last_seq,
        },
        Wakeup::TaskRunnable,
    ]
}

/// A key this tenant already used: the same request hash replays, another hash is
/// [`StoreError::IdempotencyConflict`] naming the task the key created.
pub(crate) fn check_replay(
    stored_hash: &str,
    claim: &IdempotencyClaim,
    existing_task: TaskId,
) -> Result<(), StoreError> {
    if stored_hash != claim.request_hash {
        return Err(StoreError::IdempotencyConflict { existing_task });
    }
    Ok(())
}

/// The answer to a replayed key: the task the first request created, not created again.
pub(crate) fn replayed(task: Task) -> Created {
    Created {
        task,
        created: false,
    }
}

/// The answer to a fresh creation.
pub(crate) fn created(task: Task) -> Created {
    Created {
        task,
        created: true,
    }
}

/// The row count a page may hold: "at most `limit`", so a zero or negative limit is no rows
/// (`None`) rather than, as a negative SQLite `LIMIT` would be, no limit at all.
pub(crate) fn page_limit(limit: i64) -> Option<i64> {
    (limit > 0).then_some(limit)
}

/// A fenced single-row write (a heartbeat) holds the lease exactly when it touched the row.
pub(crate) fn lease_status(rows_affected: u64) -> LeaseStatus {
    if rows_affected == 1 {
        LeaseStatus::Held
    } else {
        LeaseStatus::Lost
    }
}

/// A stored status name, or [`StoreError::Corrupt`]: the table's text is never trusted blindly.
pub(crate) fn stored_status(text: &str) -> Result<TaskStatus, StoreError> {
    TaskStatus::parse(text).ok_or_else(|| StoreError::Corrupt(format!("unknown status {text:?}")))
}

/// A stored approval mode, or [`StoreError::Corrupt`].
pub(crate) fn stored_approval(
    text: &str,
) -> Result<crate::domain::approval::ApprovalMode, StoreError> {
    crate::domain::approval::ApprovalMode::parse(text)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown approval mode {text:?}")))
}

/// A stored strategy name, or [`StoreError::Corrupt`].
pub(crate) fn stored_strategy(text: &str) -> Result<Strategy, StoreError> {
    Strategy::parse(text).ok_or_else(|| StoreError::Corrupt(format!("unknown strategy {text:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(status: Option<TaskStatus>, release: bool) -> Change {
        Change {
            status,
            release,
            ..Change::default()
        }
    }

    #[test]
    fn release_requeues_and_running_keeps_the_lease() {
        let released = CommitEffect::of(&change(Some(TaskStatus::Running), true));
        assert_eq!(released.status, TaskStatus::Queued);
        assert!(!released.keeps_lease());
        let plain = CommitEffect::of(&change(None, false));
        assert_eq!(plain.status, TaskStatus::Running);
        assert!(plain.keeps_lease() && !plain.sets_finished_at());
        let done = CommitEffect::of(&change(Some(TaskStatus::Succeeded), true));
        assert_eq!(done.status, TaskStatus::Succeeded);
        assert!(done.sets_finished_at() && !done.keeps_lease());
    }

    #[test]
    fn commit_hints_and_seq_range() {
        let id = TaskId::nil();
        let requeued = CommitEffect::of(&change(None, true));
        assert_eq!(
            requeued.wakeups(id, 7, 0),
            vec![Wakeup::TaskRunnable],
            "no events, no event hint"
        );
        assert_eq!(
            CommitEffect::applied(7, 3),
            Commit::Applied {
                first_seq: 5,
                last_seq: 7
            }
        );
    }

    #[test]
    fn page_limit_is_at_most_limit() {
        assert_eq!(page_limit(0), None);
        assert_eq!(page_limit(-1), None);
        assert_eq!(page_limit(5), Some(5));
    }
}
