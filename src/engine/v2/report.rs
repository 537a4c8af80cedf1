//! The task's result: what passed, what failed and why, whether the goal was verified, and the
//! spend per unit per milestone. Written with the terminal status in one commit, together with
//! the `gate.outcome` event that links the gate's decision to how the task ended (so misroutes
//! can be counted).

use serde_json::{Value, json};

use crate::domain::event::kinds::GATE_OUTCOME;
use crate::domain::ledger::Unit;
use crate::domain::repair::rung_name;
use crate::domain::report::Cause;
use crate::domain::task::TaskStatus;
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::checkpoint::{Record, Spend, TaskState};
use crate::engine::{Halt, RunOutcome};

/// How the task ends, and the words for it.
pub struct Ending {
    pub status: TaskStatus,
    pub verified: Option<bool>,
    pub reason: String,
    /// Extra fields for the result (the direct path's answer, a verifier reason, ...).
    pub extra: Value,
    /// Why the task ended unverified or failed, when it is one of the named causes.
    pub cause: Option<Cause>,
}

/// Builds the result from the state.
pub fn result(state: &TaskState, ending: &Ending) -> Value {
    let mut total = state.overhead;
    let milestones: Vec<Value> = state
        .plan
        .iter()
        .flat_map(|plan| plan.milestones.iter())
        .map(|m| {
            let run = state.runs.get(&m.id).cloned().unwrap_or_default();
            total.add(run.spend);
            let books = |unit: &str, field: &str| -> u64 {
                let account = Unit::parse(unit).and_then(|unit| {
                    state
                        .ledger
                        .as_ref()
                        .and_then(|l| l.account(&m.id, unit).ok())
                });
                account
                    .map(|a| match field {
                        "alloc" => a.allocated,
                        "granted" => a.granted,
                        _ => a.returned,
                    })
                    .unwrap_or(0)
            };
            json!({
                "id": m.id, "title": m.title, "status": m.status, "outcome": run.outcome,
                "spend": run.spend,
                "granted": {"tokens": books("tokens", "granted"), "tool_calls": books("tool_calls", "granted"), "wall_ms": books("wall_ms", "granted")},
                "returned": {"tokens": books("tokens", "returned"), "tool_calls": books("tool_calls", "returned"), "wall_ms": books("wall_ms", "returned")},
                "repairs": run.repairs.levels.iter().map(|l| rung_name(*l)).collect::<Vec<_>>(),
                "failure": run.failure,
            })
        })
        .collect();
    let passed: Vec<&str> = state
        .plan
        .iter()
        .flat_map(|p| p.milestones.iter())
        .filter(|m| m.status == crate::domain::plan::MilestoneStatus::Done)
        .map(|m| m.id.as_str())
        .collect();
    let gate = serde_json::to_value(&state.gate).unwrap_or(Value::Null);
    json!({
        "engine": "v2",
        "status": ending.status.as_str(),
        "verified": ending.verified,
        "reason": ending.reason,
        "gate": gate,
        "plan_version": state.plan_version,
        "passed": passed,
        "milestones": milestones,
        "overhead": state.overhead,
        "spend": total,
        "ledger": state.ledger.as_ref().and_then(|l| serde_json::to_value(l).ok()),
        "metrics": state.metrics,
        "extra": ending.extra,
        "cause": ending.cause,
    })
}

/// Commits the terminal status with its result and events.
pub async fn finish(cx: &Attempt, ending: Ending) -> Result<RunOutcome, Halt> {
    let status = ending.status;
    cx.journal
        .record(|state| {
            let result = result(state, &ending);
            let mut record = Record::default();
            record.push(
                GATE_OUTCOME,
                json!({"route": state.gate.as_ref().map(|g| g.route),
                       "status": status.as_str(), "verified": ending.verified,
                       "steps_completed": state.metrics.steps_completed}),
            );
            record.finish(status, result);
            Ok((record, ()))
        })
        .await?;
    Ok(RunOutcome::Finished(status))
}

/// Total spend of a state (overhead plus every milestone).
pub fn total_spend(state: &TaskState) -> Spend {
    let mut total = state.overhead;
    for run in state.runs.values() {
        total.add(run.spend);
    }
    total
}
