//! Approval requests as both backends store them: what the engine parks a task with, what a
//! person's decision carries, how each can end, and the rules they share.
//!
//! Parking is a fenced write like a commit: only the lease holder parks its task, and the
//! same transaction stores the request, records `approval.requested`, moves the task to
//! `awaiting_approval` and clears its lease. A decision is written while no worker holds the
//! task (like a cancel), so its `approval.decided` event takes the next seq without moving
//! any worker's; it requeues the task, whose next claim reads the decision.

use std::ops::ControlFlow;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::{StoreError, Wakeup};
use crate::domain::approval::{Approval, ApprovalKind, ApprovalState, Decision};
use crate::domain::task::{Task, TaskId, TaskStatus};

/// What a task waits on.
#[derive(Debug, Clone, PartialEq)]
pub struct Park {
    pub kind: ApprovalKind,
    pub digest: String,
    pub request: Value,
    pub expires_at: Option<DateTime<Utc>>,
}

/// The outcome of parking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parked {
    /// Stored as request `approval`; the task waits without a lease.
    Waiting { approval: u32 },
    /// The lease was lost: nothing was written.
    LeaseLost,
}

/// A person's decision on one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Decide<'a> {
    pub tenant_id: &'a str,
    pub task_id: TaskId,
    pub approval: u32,
    pub decision: Decision,
    pub digest: &'a str,
    pub comment: Option<&'a str>,
    /// The API key that decides.
    pub by: &'a str,
    pub now: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DecideOutcome {
    /// No such task for this tenant, or no such request of it.
    NotFound,
    /// The request was decided (or expired) already; nothing was written.
    NotPending(ApprovalState),
    /// The task is not waiting (it was cancelled meanwhile); nothing was written.
    NotWaiting(TaskStatus),
    /// The digest is not the pending request's: what it approved is not what would run.
    Stale,
    /// Written; the task is queued again.
    Decided(Approval),
}

/// Whether `approval` of `task` may take a decision made on `digest`.
pub(crate) fn decidable(
    task: Option<&Task>,
    approval: Option<Approval>,
    digest: &str,
) -> ControlFlow<DecideOutcome, Approval> {
    let (Some(task), Some(approval)) = (task, approval) else {
        return ControlFlow::Break(DecideOutcome::NotFound);
    };
    if approval.state != ApprovalState::Pending {
        return ControlFlow::Break(DecideOutcome::NotPending(approval.state));
    }
    if task.status != TaskStatus::AwaitingApproval {
        return ControlFlow::Break(DecideOutcome::NotWaiting(task.status));
    }
    if approval.digest != digest {
        return ControlFlow::Break(DecideOutcome::Stale);
    }
    ControlFlow::Continue(approval)
}

/// The request as decided.
pub(crate) fn decided(mut approval: Approval, decide: &Decide<'_>) -> Approval {
    approval.state = decide.decision.state();
    approval.comment = decide.comment.map(str::to_string);
    approval.decided_by = Some(decide.by.to_string());
    approval.decided_at = Some(decide.now);
    approval
}

/// The `approval.requested` event's data.
pub(crate) fn requested_event(approval: u32, park: &Park) -> Value {
    let mut data = json!({
        "approval": approval,
        "kind": park.kind,
        "digest": park.digest,
        "request": park.request,
    });
    if let Some(at) = park.expires_at {
        data["expires_at"] = json!(at.timestamp_millis());
    }
    data
}

/// The `approval.decided` event's data: who decided is the key id, never a secret.
pub(crate) fn decided_event(approval: &Approval) -> Value {
    let mut data = json!({
        "approval": approval.id,
        "decision": approval.state,
        "digest": approval.digest,
        "by": approval.decided_by,
    });
    if let Some(comment) = &approval.comment {
        data["comment"] = json!(comment);
    }
    data
}

/// The report of a task whose request expired.
pub(crate) fn expired_report(approval: u32) -> Value {
    json!({
        "reason": "approval_expired",
        "detail": format!("nobody decided approval request {approval} before it expired"),
        "approval": approval,
    })
}

/// The hints after a park: its event.
pub(crate) fn parked_wakeups(task_id: TaskId, last_seq: i64) -> Vec<Wakeup> {
    vec![Wakeup::Events { task_id, last_seq }]
}

/// The hints after a decision: its event, and a claimable task.
pub(crate) fn decided_wakeups(task_id: TaskId, last_seq: i64) -> Vec<Wakeup> {
    vec![Wakeup::Events { task_id, last_seq }, Wakeup::TaskRunnable]
}

/// A stored kind, or a clear error.
pub(crate) fn stored_kind(text: &str) -> Result<ApprovalKind, StoreError> {
    ApprovalKind::parse(text)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown approval kind {text:?}")))
}

/// A stored state, or a clear error.
pub(crate) fn stored_state(text: &str) -> Result<ApprovalState, StoreError> {
    ApprovalState::parse(text)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown approval state {text:?}")))
}

/// A stored request number.
pub(crate) fn stored_id(id: i64) -> Result<u32, StoreError> {
    u32::try_from(id).map_err(|_| StoreError::Corrupt(format!("approval id {id} out of range")))
}
