//! One milestone from start to a decision: tactical steps, one step at a time, the monitor's
//! check, and local repair when the check fails or a step does.
//!
//! The loop is the planner/executor loop (one approved step at a time, verified, repaired or
//! stopped) for one milestone, with the ledger's budget rule folded in: after every charge the
//! monitor looks at the fraction of the allocation used; at the pressure mark with steps left it
//! checks early, and a failing check under pressure skips straight past step retries. A transient
//! fault is retried unchanged after a backoff (no planner is asked) until its retries are spent; a
//! step whose answer raises a constraint the plan did not know asks for a new strategy.

use serde_json::json;

use super::executor::{self, StepOutcome};
use super::monitor::{self, CheckCause};
use super::repair::{self, Rung};
use super::tactical::{self, Ask, Planned};
use crate::domain::event::kinds::MILESTONE_STARTED;
use crate::domain::ledger::Unit;
use crate::domain::plan::MilestoneStatus;
use crate::domain::repair::{RepairLevel, ReplanReason};
use crate::engine::Halt;
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::checkpoint::{Failure, MilestoneOutcome, Record};
use crate::engine::runtime::ledger;

/// How a milestone's run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum MilestoneEnd {
    Passed,
    /// The ladder is spent; the milestone is failed.
    Failed(Failure),
    /// The ledger could not cover a charge, reserve included.
    Exhausted {
        unit: Unit,
    },
    /// The ladder asks for a new strategy (L3).
    ReplanStrategy(Failure),
    /// A person's message raised a constraint the plan did not know: a new strategy that uses
    /// up none of the ladder's.
    Steered(Failure),
    /// Stopped at a durable point (shutdown, lease lost, or another milestone's outcome).
    Stopped,
}

/// Where the milestone's loop goes after a phase.
enum Turn {
    /// On to the next phase of this round.
    Next,
    /// Back to the top of the loop.
    Again,
    /// The milestone's run is over.
    End(MilestoneEnd),
}

impl Turn {
    /// A ladder decision: the run ends, or carries on with new steps.
    fn of(end: Option<MilestoneEnd>) -> Turn {
        end.map_or(Turn::Again, Turn::End)
    }
}

/// Runs `milestone_id` until the monitor decides. `resumed` re-runs the check first.
pub async fn run(cx: &Attempt, milestone_id: &str, resumed: bool) -> Result<MilestoneEnd, Halt> {
    if let Some(end) = begin(cx, milestone_id, resumed).await? {
        return Ok(end);
    }
    loop {
        if cx.stopping() {
            return Ok(MilestoneEnd::Stopped);
        }
        if let Some(failure) = super::steering::take(cx).await? {
            return Ok(MilestoneEnd::Steered(failure));
        }
        match ensure_steps(cx, milestone_id).await? {
            Turn::Next => {}
            Turn::Again => continue,
            Turn::End(end) => return Ok(end),
        }
        // A committed step list is a durable point: a sibling's replan (or a person's message)
        // that came while it was written stops it before its first step runs.
        if cx.stopping() {
            return Ok(MilestoneEnd::Stopped);
        }
        let outcome = executor::run_next_step(cx, milestone_id).await?;
        match after_step(cx, milestone_id, outcome).await? {
            Turn::End(end) => return Ok(end),
            Turn::Next | Turn::Again => {}
        }
    }
}

/// Starts a pending milestone, or re-checks a resumed active one. `Some` ends the run before
/// any step.
async fn begin(
    cx: &Attempt,
    milestone_id: &str,
    resumed: bool,
) -> Result<Option<MilestoneEnd>, Halt> {
    let status = cx
        .journal
        .read(|s| {
            s.plan
                .as_ref()
                .and_then(|p| p.milestone(milestone_id))
                .map(|m| m.status)
        })
        .await;
    match status {
        Some(MilestoneStatus::Pending) => {
            // Staged: the tactical steps (or the first tool call's flush) commit it.
            cx.journal
                .stage(|state| {
                    if let Some(m) = state
                        .plan
                        .as_mut()
                        .and_then(|p| p.milestone_mut(milestone_id))
                    {
                        m.status = MilestoneStatus::Active;
                    }
                    Ok((
                        Record::event(MILESTONE_STARTED, json!({"milestone": milestone_id})),
                        (),
                    ))
                })
                .await?;
            Ok(None)
        }
        Some(MilestoneStatus::Active) if resumed && !cx.after_park => {
            // The world may have changed while no one was watching: check before trusting.
            let checked = monitor::check(cx, milestone_id, CheckCause::Resume).await?;
            if let Some(unit) = checked.exhausted {
                return Ok(Some(MilestoneEnd::Exhausted { unit }));
            }
            Ok(checked.outcome.passed.then_some(MilestoneEnd::Passed))
        }
        Some(MilestoneStatus::Active) => Ok(None),
        Some(MilestoneStatus::Done) => Ok(Some(MilestoneEnd::Passed)),
        _ => Ok(Some(MilestoneEnd::Stopped)),
    }
}

/// Asks the tactical planner for steps when the milestone has none or needs new ones.
async fn ensure_steps(cx: &Attempt, milestone_id: &str) -> Result<Turn, Halt> {
    let (has_steps, needs_steps, pending_repair, failure) = cx
        .journal
        .read(|s| {
            let steps = s
                .plan
                .as_ref()
                .and_then(|p| p.milestone(milestone_id))
                .is_some_and(|m| !m.steps.is_empty());
            let run = s.runs.get(milestone_id).cloned().unwrap_or_default();
            (steps, run.needs_steps, run.pending_repair, run.failure)
        })
        .await;
    if has_steps && !needs_steps {
        return Ok(Turn::Next);
    }
    let ask = Ask::of(pending_repair, has_steps);
    // A continuation answers no failure: the steps before it succeeded.
    let failure = failure.filter(|_| ask != Ask::Continue);
    match tactical::plan_steps(cx, milestone_id, ask, failure.as_ref()).await? {
        Planned::Steps { .. } => Ok(Turn::Next),
        Planned::Exhausted { unit } => Ok(Turn::End(MilestoneEnd::Exhausted { unit })),
        // No usable rest: the list as it was written runs on, and its steps answer for it.
        Planned::Unusable { .. } if ask == Ask::Continue => {
            continue_as_written(cx, milestone_id).await?;
            Ok(Turn::Next)
        }
        Planned::Repeated { fingerprint, to } => {
            let from = match ask {
                Ask::RetryStep => RepairLevel::RetryStep,
                _ => RepairLevel::ReplanMilestone,
            };
            let failure =
                failure.unwrap_or_else(|| Failure::of_plan(ReplanReason::CheckFailed, ""));
            let note = format!("(proposal {fingerprint} already failed)");
            let failure = if failure.detail.contains(&note) {
                failure
            } else {
                Failure {
                    detail: format!("{} {note}", failure.detail),
                    ..failure
                }
            };
            let rung = Rung::Forced {
                level: to,
                from: Some(from),
            };
            Ok(Turn::of(escalate(cx, milestone_id, failure, rung).await?))
        }
        Planned::Unusable { reason } => {
            let failure = Failure::of_plan(
                ReplanReason::UnexpectedObservation,
                format!("the tactical planner gave no usable steps: {reason}"),
            );
            let rung = Rung::Forced {
                level: Some(RepairLevel::ReplanStrategy),
                from: Some(RepairLevel::ReplanMilestone),
            };
            Ok(Turn::of(escalate(cx, milestone_id, failure, rung).await?))
        }
    }
}

/// What a step's outcome means: carry on, check the milestone (when its steps are done or
/// budget pressure says so), or repair.
async fn after_step(cx: &Attempt, milestone_id: &str, outcome: StepOutcome) -> Result<Turn, Halt> {
    let (steps_left, pressured) = cx
        .journal
        .read(|s| {
            let run = s.runs.get(milestone_id);
            let next = run.map(|r| r.next_step).unwrap_or(0);
            let left = s
                .plan
                .as_ref()
                .and_then(|p| p.milestone(milestone_id))
                .is_some_and(|m| next < m.steps.len());
            (left, run.is_some_and(|r| r.pressured))
        })
        .await;
    let (failure, pressure) = match outcome {
        StepOutcome::Exhausted { unit } => return Ok(Turn::End(MilestoneEnd::Exhausted { unit })),
        StepOutcome::Stale { failure } | StepOutcome::Constrained { failure } => {
            // Only a new strategy can route around a tool that is gone, or respect a
            // constraint the plan did not know.
            let rung = Rung::Forced {
                level: Some(RepairLevel::ReplanStrategy),
                from: None,
            };
            return Ok(Turn::of(escalate(cx, milestone_id, failure, rung).await?));
        }
        StepOutcome::Transient {
            failure,
            call,
            fraction,
        } => match transient(cx, milestone_id, failure, &call).await? {
            Some(failure) => (failure, fraction >= cx.config.pressure_frac),
            None => return Ok(Turn::Again),
        },
        StepOutcome::Failed { failure, fraction } => (failure, fraction >= cx.config.pressure_frac),
        StepOutcome::Done { fraction } if steps_left => {
            if fraction < cx.config.pressure_frac || pressured {
                ask_rest_if_guessed(cx, milestone_id).await?;
                return Ok(Turn::Again);
            }
            match judge(cx, milestone_id, CheckCause::BudgetPressure).await? {
                Judged::Decided(end) => return Ok(Turn::End(end)),
                Judged::Failing(failure) => (failure, true),
            }
        }
        StepOutcome::Done { .. } | StepOutcome::NoStep => {
            if super::follow_up::ask_if_due(cx, milestone_id).await? {
                return Ok(Turn::Again);
            }
            match judge(cx, milestone_id, CheckCause::StepsDone).await? {
                Judged::Decided(end) => return Ok(Turn::End(end)),
                Judged::Failing(failure) => {
                    let pressure = fraction(cx, milestone_id).await >= cx.config.pressure_frac;
                    (failure, pressure)
                }
            }
        }
    };
    let rung = Rung::Decide { pressure };
    let (level, failure) = repair::start(cx, milestone_id, failure, rung).await?;
    Ok(Turn::of(settle(cx, milestone_id, level, failure).await?))
}

/// After a step succeeded: when the next step names a value its planner was not shown, the
/// rest of the list is asked for again with that step's output in view (a continuation).
async fn ask_rest_if_guessed(cx: &Attempt, milestone_id: &str) -> Result<(), Halt> {
    let guessed = cx
        .journal
        .read(|s| {
            s.runs
                .get(milestone_id)
                .is_some_and(|run| run.guessed.contains(&run.next_step))
        })
        .await;
    if guessed {
        cx.journal
            .stage(|state| {
                state.run_mut(milestone_id).needs_steps = true;
                Ok((Record::default(), ()))
            })
            .await?;
    }
    Ok(())
}

/// Lets a list whose continuation was unusable run on as written.
async fn continue_as_written(cx: &Attempt, milestone_id: &str) -> Result<(), Halt> {
    cx.journal
        .stage(|state| {
            let run = state.run_mut(milestone_id);
            run.needs_steps = false;
            let next = run.next_step;
            run.guessed.remove(&next);
            Ok((Record::default(), ()))
        })
        .await?;
    Ok(())
}

/// A transient fault: the same call again after its backoff (`None`), or, once its retries
/// are spent, the failure to repair: the tool stayed unavailable.
async fn transient(
    cx: &Attempt,
    milestone_id: &str,
    failure: Failure,
    call: &str,
) -> Result<Option<Failure>, Halt> {
    if let Some(backoff_ms) = repair::retry_same(cx, milestone_id, &failure, call).await? {
        tokio::time::sleep(std::time::Duration::from_millis(backoff_ms)).await;
        return Ok(None);
    }
    Ok(Some(Failure {
        reason: ReplanReason::ToolUnavailable,
        detail: format!(
            "{} (still failing after {} unchanged retries)",
            failure.detail, cx.config.max_transient_retries
        ),
        ..failure
    }))
}

/// A check's verdict for the loop: decided (passed, or out of budget) or failing.
enum Judged {
    Decided(MilestoneEnd),
    Failing(Failure),
}

async fn judge(cx: &Attempt, milestone_id: &str, cause: CheckCause) -> Result<Judged, Halt> {
    let checked = monitor::check(cx, milestone_id, cause).await?;
    if let Some(unit) = checked.exhausted {
        return Ok(Judged::Decided(MilestoneEnd::Exhausted { unit }));
    }
    if checked.outcome.passed {
        return Ok(Judged::Decided(MilestoneEnd::Passed));
    }
    let reason = if cause == CheckCause::BudgetPressure {
        ReplanReason::BudgetPressure
    } else {
        ReplanReason::CheckFailed
    };
    let detail = checked.outcome.failures.join("; ");
    Ok(Judged::Failing(
        Failure::of_plan(reason, detail).at(checked.seq),
    ))
}

/// The largest fraction of its allocation `milestone_id` has used, over the three units.
async fn fraction(cx: &Attempt, milestone_id: &str) -> f64 {
    cx.journal
        .read(|s| s.ledger.as_ref().map(|l| ledger::fraction(l, milestone_id)))
        .await
        .unwrap_or(0.0)
}

/// Takes an already decided rung (after a repeated or unusable proposal, or a stale plan).
async fn escalate(
    cx: &Attempt,
    milestone_id: &str,
    failure: Failure,
    rung: Rung,
) -> Result<Option<MilestoneEnd>, Halt> {
    let (level, failure) = repair::start(cx, milestone_id, failure, rung).await?;
    settle(cx, milestone_id, level, failure).await
}

/// What a ladder decision means for the milestone's loop: `None` carries on with new steps.
async fn settle(
    cx: &Attempt,
    milestone_id: &str,
    level: Option<RepairLevel>,
    failure: Failure,
) -> Result<Option<MilestoneEnd>, Halt> {
    match level {
        Some(RepairLevel::RetryStep | RepairLevel::ReplanMilestone) => Ok(None),
        Some(RepairLevel::ReplanStrategy) => Ok(Some(MilestoneEnd::ReplanStrategy(failure))),
        None => {
            monitor::fail(cx, milestone_id, MilestoneOutcome::Failed, &failure).await?;
            Ok(Some(MilestoneEnd::Failed(failure)))
        }
    }
}
