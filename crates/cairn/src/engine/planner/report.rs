//! The task's result: what passed, what failed and why, whether the goal was verified, and the
//! spend per unit per milestone. Written with the terminal status in one commit, together with
//! the `gate.outcome` event that links the gate's decision to how the task ended (so misroutes
//! can be counted).

use serde_json::{Value, json};

use crate::domain::event::kinds::GATE_OUTCOME;
use crate::domain::ledger::{Account, Ledger, Unit};
use crate::domain::plan::Milestone;
use crate::domain::repair::rung_name;
use crate::domain::report::Cause;
use crate::domain::task::{Budget, TaskStatus};
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::checkpoint::{Record, Spend, TaskState};
use crate::engine::runtime::ledger;
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

/// Builds the result from the state. The spend figures are the ledger's: `spend` is every
/// charge on the books (overhead, every milestone of every plan version, including those an
/// L3 replan dropped, which are listed with status `dropped`), so it equals the sum of the
/// task's `charge` entries.
pub fn result(state: &TaskState, ending: &Ending) -> Value {
    let ledger = state.ledger.as_ref();
    let planned: Vec<&Milestone> = state
        .plan
        .iter()
        .flat_map(|plan| plan.milestones.iter())
        .collect();
    let dropped: Vec<&str> = ledger
        .map(|l| {
            l.milestones()
                .filter(|id| !planned.iter().any(|m| m.id == *id))
                .collect()
        })
        .unwrap_or_default();
    let milestones: Vec<Value> = planned
        .iter()
        .map(|m| milestone(state, &m.id, json!(m.title), json!(m.status)))
        .chain(
            dropped
                .iter()
                .map(|id| milestone(state, id, Value::Null, json!("dropped"))),
        )
        .collect();
    let passed: Vec<&str> = planned
        .iter()
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
        "spend": ledger::charged(state),
        "spend_estimated": state.estimated,
        "ledger": ledger.map(Ledger::summary),
        "artifacts": state.artifacts,
        "metrics": state.metrics,
        "extra": ending.extra,
        "cause": ending.cause,
    })
}

/// One milestone's line of the result: its spend, grants and returns from the ledger.
fn milestone(state: &TaskState, id: &str, title: Value, status: Value) -> Value {
    let run = state.runs.get(id).cloned().unwrap_or_default();
    let books = |field: fn(&Account) -> u64| -> Spend {
        let mut figures = Spend::default();
        for unit in Unit::ALL {
            *figures.get_mut(unit) = state
                .ledger
                .as_ref()
                .and_then(|l| l.account(id, unit).ok())
                .map(field)
                .unwrap_or(0);
        }
        figures
    };
    let spend = match state.ledger.as_ref() {
        Some(_) => books(|a| a.spent),
        None => run.spend,
    };
    json!({
        "id": id, "title": title, "status": status, "outcome": run.outcome,
        "spend": spend,
        "granted": books(|a| a.granted),
        "returned": books(|a| a.returned),
        "repairs": run.repairs.levels.iter().map(|l| rung_name(*l)).collect::<Vec<_>>(),
        "failure": run.failure,
    })
}

/// A charge nothing in the budget covers ends the task `budget_exhausted`, whatever else it
/// was about to end as: the books are never silently exceeded.
fn within_budget(state: &TaskState, budget: Budget, ending: Ending) -> Ending {
    match ledger::overdrawn(state, budget) {
        Some(unit) if ending.status != TaskStatus::BudgetExhausted => Ending {
            status: TaskStatus::BudgetExhausted,
            reason: match state.refused {
                Some(_) => format!(
                    "a call needed more {} than the budget had left, and was not sent; {}",
                    unit.as_str(),
                    ending.reason
                ),
                None => format!(
                    "the budget cannot cover the {} spent (task overhead beyond the reserve); {}",
                    unit.as_str(),
                    ending.reason
                ),
            },
            extra: json!({"unit": unit, "ended_as": ending.status.as_str(), "extra": ending.extra}),
            ..ending
        },
        _ => ending,
    }
}

/// The ending for a task whose books are overdrawn (see [`within_budget`]), if they are.
pub async fn overdrawn(cx: &Attempt) -> Option<Ending> {
    let budget = cx.task().budget;
    let (unit, refused) = cx
        .journal
        .read(|s| (ledger::overdrawn(s, budget), s.refused.is_some()))
        .await;
    let unit = unit?;
    let reason = match refused {
        true => format!(
            "a call needed more {} than the budget had left, and was not sent",
            unit.as_str()
        ),
        false => format!(
            "task overhead (gate, planning, verification) ran out of {} and the reserve cannot cover it",
            unit.as_str()
        ),
    };
    Some(Ending {
        status: TaskStatus::BudgetExhausted,
        verified: None,
        reason,
        extra: json!({"unit": unit}),
        cause: None,
    })
}

/// Commits the terminal status with its result and events.
pub async fn finish(cx: &Attempt, ending: Ending) -> Result<RunOutcome, Halt> {
    let budget = cx.task().budget;
    let ending = cx
        .journal
        .read(|state| within_budget(state, budget, ending))
        .await;
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
