//! The monitor: the one component that decides a milestone passed, failed or ran out of budget.
//!
//! Keeping the decision in one place makes the run auditable: every decision is a
//! `monitor.decided` event with its reason. Checks a program can evaluate are preferred (they are
//! more reliable than asking a model whether it succeeded); a `command` leaf is performed by the
//! registered runner tool (cairn never runs a shell), a `verifier` leaf by the verifier model and
//! recorded as weaker evidence. Both are charged to the milestone like any other call.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::domain::event::kinds::MONITOR_DECIDED;
use crate::domain::ledger::Unit;
use crate::domain::plan::backing::steps_succeeded;
use crate::domain::plan::check::{Check, CheckOutcome, ExternalResult, evaluate};
use crate::domain::plan::{Milestone, MilestoneStatus};
use crate::engine::Halt;
use crate::engine::runtime::attempt::Question;
use crate::engine::runtime::attempt::{Attempt, brief};
use crate::engine::runtime::checkpoint::{
    Failure, MilestoneOutcome, MilestoneRun, Record, Spend, TaskState,
};
use crate::engine::runtime::ledger;
use crate::engine::runtime::ports::{Purpose, Repeat, ToolCall};
use crate::engine::runtime::reserve::Hold;
use crate::engine::{prompts, schemas};

/// The result of one check evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    pub outcome: CheckOutcome,
    /// The seq of the `monitor.decided` event (a repair's plan version points at it).
    pub seq: i64,
    pub exhausted: Option<Unit>,
}

/// Why a check is being run: recorded on the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckCause {
    /// All steps of the current list ran.
    StepsDone,
    /// The milestone reached the budget-pressure fraction with steps left.
    BudgetPressure,
    /// Resuming after a crash: the world may have changed since the last attempt.
    Resume,
}

impl CheckCause {
    fn as_str(self) -> &'static str {
        match self {
            CheckCause::StepsDone => "steps_done",
            CheckCause::BudgetPressure => "budget_pressure",
            CheckCause::Resume => "resume",
        }
    }
}

/// Evaluates `milestone_id`'s check and commits the decision. A pass also completes the
/// milestone: status `done` and its unspent allocation returned to the reserve.
pub async fn check(cx: &Attempt, milestone_id: &str, cause: CheckCause) -> Result<Checked, Halt> {
    let (milestone, run, artifacts) = cx
        .journal
        .read(|state| {
            let milestone = state
                .plan
                .as_ref()
                .and_then(|plan| plan.milestone(milestone_id))
                .cloned();
            let run = state.runs.get(milestone_id).cloned().unwrap_or_default();
            let artifacts = state
                .artifacts
                .get(milestone_id)
                .cloned()
                .unwrap_or_default();
            (milestone, run, artifacts)
        })
        .await;
    let Some(milestone) = milestone else {
        return Err(Halt::Error(crate::engine::EngineError::Other(format!(
            "milestone {milestone_id} is not in the plan"
        ))));
    };
    // A repair that found nothing missing on steps that all succeeded leaves the milestone to
    // the engine's own check (`tactical::recut`).
    let accept = match run.engine_check {
        true => engine_check(cx, &milestone),
        false => milestone.accept.clone(),
    };
    let subject = Subject {
        milestone_id,
        milestone: &milestone,
        accept: &accept,
        run: &run,
        artifacts: &artifacts,
    };
    // A command leaf's runner call commits what is staged first; a check that calls no tool
    // (its artifacts alone, a verifier model) commits nothing: the step's result before it
    // commits with the check's decision and what follows.
    // The leaves' reservations stay held until their charges are on the books (`decide`).
    let (external, spends, holds) = perform(cx, &subject).await?;
    let evaluated = Evaluated {
        milestone_id,
        cause,
        outcome: evaluate(&accept, &artifacts, &external),
        engine_check: run.engine_check,
        external,
        spends,
    };
    // Staged: what follows (a repair, the next milestone's start and steps, the verifier and
    // the ending) commits it.
    let (applied, exhausted) = cx.journal.stage(|state| decide(state, &evaluated)).await?;
    drop(holds);
    Ok(Checked {
        outcome: evaluated.outcome,
        seq: applied.last_seq,
        exhausted,
    })
}

/// The milestone's check with its verifier leaves replaced by what the engine derives from the
/// milestone's tools: its steps succeeded, and every artifact declared by a tool its steps
/// called is present and non-empty. Its programmatic leaves stay.
fn engine_check(cx: &Attempt, milestone: &Milestone) -> Check {
    let mut names: Vec<&str> = milestone
        .steps
        .iter()
        .filter_map(|s| cx.specs.get(&s.tool))
        .flat_map(|spec| spec.artifacts.iter().map(String::as_str))
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut checks: Vec<Check> = milestone
        .accept
        .leaves()
        .into_iter()
        .filter(|leaf| !matches!(leaf, Check::Verifier { .. } | Check::StepsSucceeded))
        .cloned()
        .collect();
    checks.push(Check::StepsSucceeded);
    checks.extend(names.into_iter().map(|name| Check::Artifact {
        name: name.to_string(),
        non_empty: true,
    }));
    Check::All { checks }
}

/// What a check is evaluated on.
struct Subject<'a> {
    milestone_id: &'a str,
    milestone: &'a Milestone,
    /// The check judged: the milestone's, or the engine's own ([`MilestoneRun::engine_check`]).
    accept: &'a Check,
    run: &'a MilestoneRun,
    artifacts: &'a BTreeMap<String, Value>,
}

/// The results of the check's external leaves (by leaf index), what each cost, and their
/// calls' reservations.
type Performed = (
    BTreeMap<usize, ExternalResult>,
    Vec<(&'static str, Spend)>,
    Vec<Hold>,
);

/// Performs the leaves a program cannot evaluate from the artifacts: `command` leaves through
/// the runner tool, `verifier` leaves through the verifier model, `steps_succeeded` from the
/// milestone's steps and their observations.
async fn perform(cx: &Attempt, subject: &Subject<'_>) -> Result<Performed, Halt> {
    let mut external = BTreeMap::new();
    let mut spends = Vec::new();
    let mut holds = Vec::new();
    for (index, leaf) in subject.accept.leaves().into_iter().enumerate() {
        let (source, result, spend) = match leaf {
            Check::Command { tool, args, .. } => {
                let (result, spend, hold) = command(cx, subject, index, tool, args).await?;
                holds.extend(hold);
                ("check", result, spend)
            }
            Check::Verifier { prompt } => {
                let (result, spend, hold) = verifier(cx, subject, prompt).await;
                holds.extend(hold);
                ("verifier", result, spend)
            }
            Check::StepsSucceeded => {
                // Read off the milestone's own steps: no call, nothing to charge.
                // The side-effecting tools this milestone set out to call: in its current
                // list, or in a call it sent (one a repair may since have dropped; a step the
                // executor refused was never sent).
                let sent = subject
                    .run
                    .observations
                    .iter()
                    .filter(|o| o.get("ok").is_some());
                let tried = subject
                    .milestone
                    .steps
                    .iter()
                    .map(|s| s.tool.as_str())
                    .chain(sent.filter_map(|o| o.get("tool").and_then(Value::as_str)));
                let mut writers: Vec<&str> = tried
                    .filter(|t| cx.specs.get(*t).is_some_and(|spec| spec.side_effects))
                    .collect();
                writers.sort_unstable();
                writers.dedup();
                let result = steps_succeeded(
                    &subject.milestone.steps,
                    &subject.run.observations,
                    &writers,
                );
                external.insert(index, ExternalResult::Steps(result));
                continue;
            }
            _ => continue,
        };
        spends.push((source, spend));
        external.insert(index, result);
    }
    Ok((external, spends, holds))
}

async fn command(
    cx: &Attempt,
    subject: &Subject<'_>,
    index: usize,
    tool: &str,
    args: &Value,
) -> Result<(ExternalResult, Spend, Option<Hold>), Halt> {
    let call = ToolCall {
        task_id: cx.task().id,
        tool: tool.to_string(),
        args: args.clone(),
        // A deliberate repeat per evaluation and per claim: a check must really re-run after a
        // resume, never be answered from a receipt.
        repeat: Repeat::Check {
            milestone: format!("{}#{index}", subject.milestone_id),
            run: subject.run.check_runs + 1,
            claim: u32::try_from(cx.task().attempts).unwrap_or(0),
        },
    };
    let called = cx.call_tool(call, Some(subject.milestone_id)).await?;
    let result = match called.reply {
        Ok(reply) => match reply.error {
            Some(error) => ExternalResult::Unavailable(error),
            None => ExternalResult::Command(reply.output),
        },
        Err(error) => ExternalResult::Unavailable(error.message),
    };
    Ok((result, called.spend, called.hold))
}

async fn verifier(
    cx: &Attempt,
    subject: &Subject<'_>,
    prompt: &str,
) -> (ExternalResult, Spend, Option<Hold>) {
    let Subject {
        milestone_id,
        milestone,
        accept: _,
        run,
        artifacts,
    } = subject;
    let asked = cx
        .ask(Question {
            purpose: Purpose::Verifier,
            milestone: Some(*milestone_id),
            attempt: run.check_runs + 1,
            prompt: &prompts::CHECK_VERIFIER,
            input: json!({"condition": prompt, "milestone": milestone.title,
                   "outcome": milestone.outcome, "artifacts": brief(&json!(artifacts), 8000),
                   "observations": run.observations.iter().rev().take(8).collect::<Vec<_>>()}),
            turns: Vec::new(),
            schema: schemas::verdict(),
        })
        .await;
    let result = match asked.reply {
        Ok(reply) => ExternalResult::Verdict(reply.value),
        Err(error) => ExternalResult::Unavailable(error.message),
    };
    (result, asked.spend, asked.hold)
}

/// An evaluated check, as its decision is committed.
struct Evaluated<'a> {
    milestone_id: &'a str,
    cause: CheckCause,
    outcome: CheckOutcome,
    external: BTreeMap<usize, ExternalResult>,
    spends: Vec<(&'static str, Spend)>,
    engine_check: bool,
}

/// Commits the check's charges and its `monitor.decided` event; a pass completes the
/// milestone. Returns the unit the charges could not cover, if any.
fn decide(
    state: &mut TaskState,
    evaluated: &Evaluated<'_>,
) -> Result<(Record, Option<Unit>), Halt> {
    let Evaluated {
        milestone_id,
        cause,
        outcome,
        external,
        spends,
        engine_check,
    } = evaluated;
    let mut record = Record::default();
    let mut exhausted = None;
    for (source, spend) in spends {
        if let Some(charged) =
            ledger::charge(state, Some(*milestone_id), *spend, source, &mut record)?
            && exhausted.is_none()
        {
            exhausted = charged.exhausted;
        }
    }
    state.run_mut(milestone_id).check_runs += 1;
    if outcome.passed && exhausted.is_none() {
        if let Some(m) = state
            .plan
            .as_mut()
            .and_then(|plan| plan.milestone_mut(milestone_id))
        {
            m.status = MilestoneStatus::Done;
        }
        state.run_mut(milestone_id).outcome = Some(MilestoneOutcome::Passed);
        ledger::release(state, milestone_id, &mut record)?;
    } else {
        state.run_mut(milestone_id).observations.push(
            json!({"check": "failed", "failures": outcome.failures, "cause": cause.as_str()}),
        );
    }
    // The decision goes last so its seq is the one a repair points at.
    let mut decided = json!({
        "milestone": milestone_id,
        "decision": if outcome.passed { "passed" } else { "failing" },
        "reason": if outcome.passed { "check passed".to_string() } else { outcome.failures.join("; ") },
        "evidence": outcome.evidence,
        "cause": cause.as_str(),
        "external": external_summary(external),
    });
    if *engine_check {
        // Judged by the engine's check, not the planner's: said on the decision.
        decided["check"] = json!("steps_succeeded");
        decided["engine_check"] = json!(true);
    }
    record.push(MONITOR_DECIDED, decided);
    Ok((record, exhausted))
}

fn external_summary(external: &BTreeMap<usize, ExternalResult>) -> Value {
    let items: Vec<Value> = external
        .iter()
        .map(|(index, result)| match result {
            ExternalResult::Command(output) => {
                json!({"leaf": index, "command": brief(output, 1000)})
            }
            ExternalResult::Verdict(verdict) => json!({"leaf": index, "verdict": verdict,
                                                        "prompt": prompts::CHECK_VERIFIER.version()}),
            ExternalResult::Unavailable(reason) => json!({"leaf": index, "unavailable": reason}),
            ExternalResult::Steps(Ok(())) => json!({"leaf": index, "steps": "succeeded"}),
            ExternalResult::Steps(Err(missing)) => json!({"leaf": index, "steps": missing}),
        })
        .collect();
    Value::Array(items)
}

/// Ends a milestone as failed (`failed`, or `over_budget` when the ledger ran dry).
pub async fn fail(
    cx: &Attempt,
    milestone_id: &str,
    decision: MilestoneOutcome,
    failure: &Failure,
) -> Result<i64, Halt> {
    let (applied, ()) = cx
        .journal
        .record(|state| {
            if let Some(m) = state
                .plan
                .as_mut()
                .and_then(|plan| plan.milestone_mut(milestone_id))
            {
                m.status = MilestoneStatus::Failed;
            }
            state.run_mut(milestone_id).outcome = Some(decision);
            Ok((
                Record::event(
                    MONITOR_DECIDED,
                    json!({"milestone": milestone_id, "decision": decision,
                           "reason": failure.detail, "replan_reason": failure.reason,
                           "executor_failure": failure.executor}),
                ),
                (),
            ))
        })
        .await?;
    Ok(applied.last_seq)
}
