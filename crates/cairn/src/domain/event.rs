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
    #[serde(serialize_with = "crate::domain::instant::millis")]
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

/// The event catalog: every kind cairn writes, with the fields of its `data` (the payload).
/// SSE is public API, so a kind or a field is added here, never invented at a call site; the
/// `catalog` test guards that no other module defines or formats an event kind.
pub mod kinds {
    // The task's lifecycle (store and worker pool).
    /// `{goal, strategy, budget}`: the task was accepted (both backends write the same data).
    pub const TASK_CREATED: &str = "task.created";
    /// `{worker_id, fence, attempt, lease_expires_at}`: a worker took the lease.
    pub const TASK_CLAIMED: &str = "task.claimed";
    /// `{worker_id, reason}`: the lease was given back at a durable point (shutdown); the task
    /// is queued again.
    pub const TASK_RELEASED: &str = "task.released";
    /// `{worker_id, fence, lease_expires_at}`: the lease ran out; the reaper requeued the task.
    pub const TASK_LEASE_EXPIRED: &str = "task.lease_expired";
    /// `{result}`: terminal; `result` is the engine's report.
    pub const TASK_SUCCEEDED: &str = "task.succeeded";
    /// `{result}` (the engine's report) or `{reason: "engine_error", error}`: terminal.
    pub const TASK_FAILED: &str = "task.failed";
    /// `{result}` (`{report}` from the test engine): terminal; the budget ran out, the report
    /// says what passed and what did not.
    pub const TASK_BUDGET_EXHAUSTED: &str = "task.budget_exhausted";
    /// `{previous_status}`: terminal; a client cancelled the task.
    pub const TASK_CANCELLED: &str = "task.cancelled";
    /// `{message, kind, text, by?}`: the engine took a message a person sent the task (`POST
    /// /v1/tasks/{id}/messages`), at its next durable point after the message came.
    pub const TASK_MESSAGE: &str = "task.message";
    /// `{approval, kind, digest, request, expires_at?}`: the task asked a person to sign off
    /// a plan or calls, released its lease and waits (`awaiting_approval`).
    pub const APPROVAL_REQUESTED: &str = "approval.requested";
    /// `{approval, decision, digest, comment?, by}`: a person decided; the task is queued again.
    pub const APPROVAL_DECIDED: &str = "approval.decided";
    /// `{approval}`: nobody decided before the request expired; `task.failed` follows.
    pub const APPROVAL_EXPIRED: &str = "approval.expired";
    /// `{step, ...}`: one step of the test-only minimal engine.
    pub const ENGINE_STEP: &str = "engine.step";
    /// `{version}`: a plan version was written (store-level kind; the engine reports plan
    /// versions through `plan.accepted` and `milestone.steps_planned`).
    pub const PLAN_VERSIONED: &str = "plan.versioned";

    // The v2 engine.
    /// The gate's decision record: `{route, strategy, source?, features?, reasons?, ...}`.
    pub const GATE_DECIDED: &str = "gate.decided";
    /// `{route, status, verified, steps_completed}`: the outcome of the gate's decision.
    pub const GATE_OUTCOME: &str = "gate.outcome";
    /// `{attempt, errors, proposal, repeated}`: a strategic proposal refused by validation
    /// (sent back to the planner with the errors), or, with `repeated` true, an L3 plan refused
    /// as identical to a plan that failed.
    pub const PLAN_REFUSED: &str = "plan.refused";
    /// `{attempt, version, reason, milestones}`: a valid plan was installed (`milestones` is
    /// the count).
    pub const PLAN_ACCEPTED: &str = "plan.accepted";
    /// `{attempt, reason}`: the first strategic answer had no milestone and the goal names no
    /// change and no several targets: nothing to plan, the task continues on the direct route.
    /// `{attempt, reason, handed_over, failed_milestone}`: an L3 for such a goal whose plan
    /// failed with nothing passed; the plan is handed over to the direct route.
    pub const PLAN_DECLINED: &str = "plan.declined";
    /// `{milestone, step, tool, reason, detail}`: a tool the plan relies on cannot be reached;
    /// the strategy is replanned.
    pub const PLAN_STALE: &str = "plan.stale";
    /// `{milestone}`: a milestone became active.
    pub const MILESTONE_STARTED: &str = "milestone.started";
    /// `{milestone, attempt, level, fingerprint, steps, granted?, continued?,
    /// unshown_values_in?, recut?, adopted?}`: just-in-time steps were attached; `adopted`
    /// lists the changes other milestones made that an empty first list took as this one's.
    pub const STEPS_PLANNED: &str = "milestone.steps_planned";
    /// `{milestone, attempt, errors}` or `{milestone, attempt, repeated_fingerprint, level,
    /// escalate_to}`: a step list was refused.
    pub const STEPS_REFUSED: &str = "milestone.steps_refused";
    /// `{milestone, step, tool, ok, error, output, attempt?, generation?, artifacts?}`: one tool
    /// call and what it answered (v2 adds the last three; the direct route and the baselines
    /// write the first six).
    pub const STEP_FINISHED: &str = "step.finished";
    /// `{milestone, step, tool, reason, args?}`: a step refused by the executor contract.
    pub const EXECUTOR_DRIFT: &str = "executor.drift";
    /// `{milestone, decision, reason, evidence, cause, external}` after a check, or
    /// `{milestone, decision, reason, replan_reason, executor_failure}` when a milestone
    /// fails: the monitor's verdict.
    pub const MONITOR_DECIDED: &str = "monitor.decided";
    /// `{milestone, level, class, reason, detail, step, escalated_from, budget_pressure,
    /// caused_by_seq, dependency?, blocked?}` (a transient fault's unchanged retry adds
    /// `unchanged, retry, backoff_ms`): a rung of the repair ladder was taken.
    pub const REPAIR_STARTED: &str = "repair.started";
    /// `{milestone, dependency, reason}`: a milestone cannot run because a milestone it
    /// depends on failed (`reason` is `dependency_failed`).
    pub const MILESTONE_BLOCKED: &str = "milestone.blocked";
    /// `{milestone, step, text, source}`: a constraint the plan did not know was raised (a
    /// `new_constraint` replan trigger).
    pub const CONSTRAINT_RAISED: &str = "plan.constraint_raised";
    /// `{verified, reason, attempt, evidence}`: the goal-level verifier's verdict.
    pub const VERIFIER_DECIDED: &str = "verifier.decided";
    /// `{round, steps, done}`: one model round of the direct act loop.
    pub const DIRECT_ROUND: &str = "direct.round";

    // The ledger: one event per run of movements of one kind made together (an allocation,
    // a charge, a return), `{source, movements: [{milestone, unit, amount}]}`; the ledger
    // entries stay one per movement.
    pub const LEDGER_ALLOCATE: &str = "ledger.allocate";
    pub const LEDGER_CHARGE: &str = "ledger.charge";
    pub const LEDGER_GRANT: &str = "ledger.grant";
    pub const LEDGER_RETURN: &str = "ledger.return";
    /// `{call, milestone, room, worst, refused, max_tokens, retry_max_tokens}`: a call's worst
    /// case did not fit what the milestone and the reserve had left; it was sent smaller (no
    /// re-ask, a smaller `max_tokens`), or, with `refused` naming the unit, not at all.
    pub const LEDGER_LIMITED: &str = "ledger.limited";
    /// `{call, milestone, tokens, cost}`: the endpoint reported no usage for a model call, so
    /// what its charge books is cairn's estimate (`result.spend_estimated` sums them).
    pub const LEDGER_ESTIMATED: &str = "ledger.estimated";

    // The baselines.
    /// `{strategy, round, answered, error}` (one_shot) or `{strategy, round, move}` (reactive):
    /// one model round of a baseline.
    pub const STRATEGY_ROUND: &str = "strategy.round";
    /// `{list, steps, error}`: the v1 baseline wrote a (new) full list of steps.
    pub const V1_LIST: &str = "v1.list";

    /// Every kind above.
    pub const ALL: [&str; 39] = [
        TASK_CREATED,
        TASK_CLAIMED,
        TASK_RELEASED,
        TASK_LEASE_EXPIRED,
        TASK_SUCCEEDED,
        TASK_FAILED,
        TASK_BUDGET_EXHAUSTED,
        TASK_CANCELLED,
        TASK_MESSAGE,
        APPROVAL_REQUESTED,
        APPROVAL_DECIDED,
        APPROVAL_EXPIRED,
        ENGINE_STEP,
        PLAN_VERSIONED,
        GATE_DECIDED,
        GATE_OUTCOME,
        PLAN_REFUSED,
        PLAN_ACCEPTED,
        PLAN_DECLINED,
        PLAN_STALE,
        MILESTONE_STARTED,
        STEPS_PLANNED,
        STEPS_REFUSED,
        STEP_FINISHED,
        EXECUTOR_DRIFT,
        MONITOR_DECIDED,
        REPAIR_STARTED,
        MILESTONE_BLOCKED,
        CONSTRAINT_RAISED,
        VERIFIER_DECIDED,
        DIRECT_ROUND,
        LEDGER_ALLOCATE,
        LEDGER_CHARGE,
        LEDGER_GRANT,
        LEDGER_RETURN,
        LEDGER_LIMITED,
        LEDGER_ESTIMATED,
        STRATEGY_ROUND,
        V1_LIST,
    ];

    /// The event of a run of ledger movements of one kind.
    pub fn ledger(kind: super::super::ledger::MovementKind) -> &'static str {
        use super::super::ledger::MovementKind;
        match kind {
            MovementKind::Allocate => LEDGER_ALLOCATE,
            MovementKind::Charge => LEDGER_CHARGE,
            MovementKind::Grant => LEDGER_GRANT,
            MovementKind::Return => LEDGER_RETURN,
        }
    }

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
            TaskStatus::Queued | TaskStatus::Running | TaskStatus::AwaitingApproval => None,
        }
    }

    /// The status a terminal event kind ends a task in; `None` for any other kind.
    pub fn terminal_status(kind: &str) -> Option<super::super::task::TaskStatus> {
        use super::super::task::TaskStatus;
        [
            TaskStatus::Succeeded,
            TaskStatus::Failed,
            TaskStatus::BudgetExhausted,
            TaskStatus::Cancelled,
        ]
        .into_iter()
        .find(|status| for_terminal_status(*status) == Some(kind))
    }
}
