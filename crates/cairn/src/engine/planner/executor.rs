//! The executor: exactly one approved step at a time.
//!
//! The planner decides what should happen; the executor only carries out the current step, and
//! only if it is within the contract: a tool the milestone allows, a registered tool, and
//! arguments valid against that tool's JSON Schema. Anything else is refused before any call and
//! recorded as executor drift, counted apart from planner failures (a wrong plan and a right plan
//! badly carried out need different fixes).
//!
//! Each executed step is one commit: the charge, the step's new status, the artifacts the tool
//! returned (they become the active milestone's artifacts) and a `step.finished` event.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::contract::check_contract;
use crate::domain::event::kinds::{EXECUTOR_DRIFT, PLAN_STALE, STEP_FINISHED};
use crate::domain::ledger::Unit;
use crate::domain::plan::backing::OUTCOME_UNKNOWN;
use crate::domain::plan::{Step, StepStatus};
use crate::domain::repair::{Constraint, ConstraintSource, ReplanReason};
use crate::engine::Halt;
use crate::engine::planner::follow_up::UNREACHED;
use crate::engine::runtime::attempt::{Attempt, Called, brief};
use crate::engine::runtime::checkpoint::{Failure, Record, Spend, TaskState};
use crate::engine::runtime::ledger;
use crate::engine::runtime::ports::{FailureKind, PortError, Repeat, ToolCall, ToolReply};
use crate::store::NewArtifact;

/// What happened to one step.
#[derive(Debug, Clone, PartialEq)]
pub enum StepOutcome {
    Done {
        fraction: f64,
    },
    Failed {
        failure: Failure,
        fraction: f64,
    },
    /// A transient fault (timeout, 5xx, 429, reset); `call` counts its unchanged retries.
    Transient {
        failure: Failure,
        call: String,
        fraction: f64,
    },
    /// The step succeeded, raising a constraint the plan did not know (`new_constraint`).
    Constrained {
        failure: Failure,
    },
    /// The tool is gone (a permanent failure reaching it): the plan is stale, and retrying
    /// or re-planning within the milestone cannot help.
    Stale {
        failure: Failure,
    },
    /// The charge could not be covered even from the reserve.
    Exhausted {
        unit: Unit,
    },
    /// The current step list has no step left to run.
    NoStep,
}

/// Runs the next step of `milestone_id`'s current step list.
pub async fn run_next_step(cx: &Attempt, milestone_id: &str) -> Result<StepOutcome, Halt> {
    // Only what the call needs is copied out of the state, not the whole state.
    let next = cx
        .journal
        .read(|state| {
            let milestone = state.plan.as_ref()?.milestone(milestone_id)?;
            let index = state
                .runs
                .get(milestone_id)
                .map(|run| run.next_step)
                .unwrap_or_default();
            let step = milestone.steps.get(index)?.clone();
            // The call's identity is its content: an identical action this task already
            // performed (before a resume, in an earlier attempt, repair or plan version) is
            // answered from its receipt; only an identical earlier step of this same list makes
            // it a deliberate repeat.
            let earlier = milestone.steps[..index]
                .iter()
                .map(|s| (s.tool.as_str(), &s.args));
            let repeat = Repeat::among(&step.tool, &step.args, earlier);
            Some((milestone.tools.clone(), step, index, repeat))
        })
        .await;
    let Some((tools, step, index, repeat)) = next else {
        return Ok(StepOutcome::NoStep);
    };
    if let Err(reason) = check_contract(cx, &tools, &step) {
        return record_drift(cx, milestone_id, index, &step, reason).await;
    }
    let call = ToolCall {
        task_id: cx.task().id,
        tool: step.tool.clone(),
        args: step.args.clone(),
        repeat,
    };
    // The call commits what is staged first; its reservation is held until its charge is.
    let Called { reply, spend, hold } = cx.call_tool(call, Some(milestone_id)).await?;
    let executed = Executed {
        milestone_id,
        index,
        step: &step,
        spend,
        answer: Answer::of(reply),
    };
    // A side effect goes on the record at once: its step, its charge and what it changed stay in
    // the books and the events even if the task is cancelled before the next commit. A read's
    // result is staged: lost to a crash or a cancel, it costs only the read again.
    let writes = cx
        .specs
        .get(&step.tool)
        .is_some_and(|spec| spec.side_effects);
    let (applied, outcome) = if writes {
        cx.journal.record(|state| commit(state, &executed)).await?
    } else {
        cx.journal.stage(|state| commit(state, &executed)).await?
    };
    drop(hold);
    Ok(match outcome {
        // The constraint's event is the commit's last: the L3 points at it.
        StepOutcome::Constrained { failure } => StepOutcome::Constrained {
            failure: Failure {
                seq: Some(applied.last_seq),
                ..failure
            },
        },
        other => other,
    })
}

/// A tool's answer as the executor judges it. A tool that answers with its own error made a
/// wrong-result observation; one that could not answer failed transiently (timeout, 5xx, 429,
/// reset: the same call may succeed) or for good (gone: the plan relying on it is stale).
struct Answer {
    ok: bool,
    error: Option<String>,
    output: Value,
    artifacts: BTreeMap<String, Value>,
    unreachable: Option<FailureKind>,
}

/// The typed field of a tool's output that reports a constraint (docs/tools.md).
const CONSTRAINT_FIELD: &str = "constraint";

impl Answer {
    fn of(reply: Result<ToolReply, PortError>) -> Answer {
        match reply {
            Ok(reply) => Answer {
                ok: reply.error.is_none(),
                error: reply.error,
                output: reply.output,
                artifacts: reply.artifacts,
                unreachable: None,
            },
            Err(error) => Answer {
                ok: false,
                error: Some(error.message),
                output: Value::Null,
                artifacts: BTreeMap::new(),
                unreachable: Some(error.kind),
            },
        }
    }

    fn stale(&self) -> bool {
        self.unreachable == Some(FailureKind::Permanent)
    }

    fn transient(&self) -> bool {
        matches!(
            self.unreachable,
            Some(FailureKind::Transient | FailureKind::Unreachable)
        )
    }

    /// The constraint a successful answer reports: `output.constraint`, a non-empty string.
    fn constraint(&self) -> Option<&str> {
        let text = self.output.get(CONSTRAINT_FIELD)?.as_str()?.trim();
        (self.ok && !text.is_empty()).then_some(text)
    }
}

/// One executed step, as it is committed.
struct Executed<'a> {
    milestone_id: &'a str,
    index: usize,
    step: &'a Step,
    spend: Spend,
    answer: Answer,
}

/// Commits one executed step: the charge, the artifacts, the step's status, the observation
/// and the events.
fn commit(state: &mut TaskState, executed: &Executed<'_>) -> Result<(Record, StepOutcome), Halt> {
    let Executed {
        milestone_id,
        index,
        step,
        spend,
        answer,
    } = executed;
    let mut record = Record::default();
    let charged = ledger::charge(state, Some(*milestone_id), *spend, "tool", &mut record)?;
    let fraction = charged.as_ref().map(|c| c.fraction).unwrap_or(0.0);
    let exhausted = charged.and_then(|c| c.exhausted);
    keep_artifacts(state, milestone_id, &answer.artifacts, &mut record);
    if let Some(m) = state
        .plan
        .as_mut()
        .and_then(|plan| plan.milestone_mut(milestone_id))
        && let Some(s) = m.steps.get_mut(*index)
    {
        s.status = if answer.ok {
            StepStatus::Done
        } else {
            StepStatus::Failed
        };
    }
    state.metrics.steps_total += 1;
    if answer.ok {
        state.metrics.steps_completed += 1;
    } else {
        state.metrics.executor_failures += 1;
    }
    let run = state.run_mut(milestone_id);
    // Each call's own artifacts beside its arguments: a later milestone is shown which call
    // produced which value, not only the milestone's merged artifacts, where a second call's
    // `owner` overwrote the first's.
    let mut observation = json!({
        "step": step.id, "tool": step.tool, "args": step.args,
        "ok": answer.ok, "error": answer.error, "output": brief(&answer.output, 800),
        "artifacts": brief(&json!(answer.artifacts), 800),
    });
    if answer.unreachable == Some(FailureKind::OutcomeUnknown) {
        observation[OUTCOME_UNKNOWN] = Value::Bool(true);
    }
    if !answer.ok && (answer.transient() || answer.stale()) {
        // Not the tool's own answer: a follow-up does not ask for it again (`follow_up`).
        observation[UNREACHED] = Value::Bool(true);
    }
    run.observations.push(observation);
    let generation = run.generation;
    let outcome = if answer.ok {
        run.next_step += 1;
        StepOutcome::Done { fraction }
    } else {
        failed(step, answer, fraction, format!("{}@g{generation}", step.id))
    };
    push_events(&mut record, executed, generation);
    let outcome = match answer.constraint() {
        Some(text) => constrained(state, executed, text, &mut record).unwrap_or(outcome),
        None => outcome,
    };
    let outcome = match exhausted {
        Some(unit) => StepOutcome::Exhausted { unit },
        None => outcome,
    };
    Ok((record, outcome))
}

/// The tool's artifacts become the milestone's (in the state and as artifact rows).
fn keep_artifacts(
    state: &mut TaskState,
    milestone_id: &str,
    artifacts: &BTreeMap<String, Value>,
    record: &mut Record,
) {
    for (name, value) in artifacts {
        state
            .artifacts
            .entry(milestone_id.to_string())
            .or_default()
            .insert(name.clone(), value.clone());
        record.artifacts.push(NewArtifact {
            milestone_id: milestone_id.to_string(),
            name: name.clone(),
            value: value.clone(),
        });
    }
}

/// A failed step, by class: stale when its tool is gone (`tool_unavailable`), transient when
/// the same call may succeed, a wrong result (`unexpected_observation`) when the tool
/// answered with its own error. `call` identifies the call for its transient retries.
fn failed(step: &Step, answer: &Answer, fraction: f64, call: String) -> StepOutcome {
    let reason = if answer.stale() {
        ReplanReason::ToolUnavailable
    } else {
        ReplanReason::UnexpectedObservation
    };
    let failure = Failure::of_step(reason, &step.id, answer.error.clone().unwrap_or_default());
    if answer.stale() {
        StepOutcome::Stale { failure }
    } else if answer.transient() {
        StepOutcome::Transient {
            failure,
            call,
            fraction,
        }
    } else {
        StepOutcome::Failed { failure, fraction }
    }
}

/// A successful step whose answer reports a constraint: raised from the tool; `Some` when the
/// plan did not know it.
fn constrained(
    state: &mut TaskState,
    executed: &Executed<'_>,
    text: &str,
    record: &mut Record,
) -> Option<StepOutcome> {
    let constraint = Constraint {
        text: text.to_string(),
        source: ConstraintSource::Tool {
            milestone: executed.milestone_id.to_string(),
            step: executed.step.id.clone(),
            tool: executed.step.tool.clone(),
        },
    };
    super::repair::raise_constraint(state, constraint, record)
        .map(|failure| StepOutcome::Constrained { failure })
}

/// `plan.stale` when the tool is gone, then `step.finished`.
fn push_events(record: &mut Record, executed: &Executed<'_>, generation: u32) {
    let Executed {
        milestone_id,
        step,
        answer,
        ..
    } = executed;
    if answer.stale() {
        record.push(
            PLAN_STALE,
            json!({"milestone": milestone_id, "step": step.id, "tool": step.tool,
                   "reason": ReplanReason::ToolUnavailable, "detail": answer.error}),
        );
    }
    record.push(
        STEP_FINISHED,
        json!({
            "milestone": milestone_id, "step": step.id, "tool": step.tool,
            "args": brief(&step.args, 1000),
            "attempt": step.attempt, "generation": generation, "ok": answer.ok,
            "error": answer.error, "output": brief(&answer.output, 2000),
            "artifacts": answer.artifacts.keys().collect::<Vec<_>>(),
        }),
    );
}

async fn record_drift(
    cx: &Attempt,
    milestone_id: &str,
    index: usize,
    step: &Step,
    reason: String,
) -> Result<StepOutcome, Halt> {
    let (applied, fraction) = cx
        .journal
        .record(|state| {
            state.metrics.drift += 1;
            state.metrics.executor_failures += 1;
            if let Some(s) = state
                .plan
                .as_mut()
                .and_then(|plan| plan.milestone_mut(milestone_id))
                .and_then(|m| m.steps.get_mut(index))
            {
                s.status = StepStatus::Failed;
            }
            let fraction = state
                .ledger
                .as_ref()
                .map(|l| ledger::fraction(l, milestone_id))
                .unwrap_or(0.0);
            state.run_mut(milestone_id).observations.push(json!({
                "step": step.id, "tool": step.tool, "refused": reason,
            }));
            let record = Record::event(
                EXECUTOR_DRIFT,
                json!({"milestone": milestone_id, "step": step.id, "tool": step.tool,
                       "args": brief(&step.args, 1000), "reason": reason}),
            );
            Ok((record, fraction))
        })
        .await?;
    Ok(StepOutcome::Failed {
        failure: Failure::of_step(
            ReplanReason::UnexpectedObservation,
            &step.id,
            format!("executor refused step {}: {reason}", step.id),
        )
        .at(applied.last_seq),
        fraction,
    })
}
