//! Applying the repair ladder: local repair before global replanning, so finished work is kept.
//!
//! The decisions are the domain's ([`crate::domain::repair::RepairHistory`]). The failure's
//! class picks the lowest rung: a transient fault (timeout, 5xx, 429, reset) is retried
//! unchanged after a backoff, at most `max_transient_retries` times per call, asking no
//! planner ([`retry_same`]); a wrong result starts at L1 with the error in context (at most
//! 2), then L2 asks for a new step list for the milestone (at most 2), then L3 re-plans the
//! strategy (at most 1 per task, keeping finished work). Budget pressure and a tool that stayed
//! unavailable through its retries skip L1. A proposal whose fingerprint already failed closes
//! its level and escalates (see [`super::tactical`]); so does an L3 plan identical to the one
//! it replaces (see [`super::strategic`]). This module records each decision as a
//! `repair.started` event, and the plan version the repaired plan writes points at the failure
//! that caused it.
//!
//! Replan triggers are data: an L3 taken for a milestone that others depend on is a
//! `dependency_failed` trigger naming the failed milestone and the blocked ones; a constraint
//! the plan did not know, from any source, is a `new_constraint` trigger ([`raise_constraint`]);
//! a tool that cannot be reached at all makes the plan stale (`plan.stale`), which only a new
//! strategy can route around, so that failure goes straight to L3.

use serde_json::json;

use crate::domain::event::kinds::{CONSTRAINT_RAISED, MILESTONE_BLOCKED, REPAIR_STARTED};
use crate::domain::plan::fingerprint::{Fingerprint, of_steps};
use crate::domain::repair::{
    Constraint, ConstraintSource, FailureClass, Fault, RepairDecision, RepairHistory, RepairLevel,
    RepairLimits, ReplanReason, blocked_by, rung_name,
};
use crate::engine::Halt;
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::checkpoint::{Failure, Record, TaskState};

/// The ladder's limits from the engine's settings.
pub fn limits(config: &super::EngineSettings) -> RepairLimits {
    RepairLimits {
        retry_step: config.max_retry_step,
        replan_milestone: config.max_replan_milestone,
        replan_strategy: config.max_replan_strategy,
        transient_retries: config.max_transient_retries,
        transient_backoff_ms: config.transient_backoff_ms,
    }
}

/// How the next rung is chosen. A rung is `Some(level)`, or `None` for giving up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rung {
    /// The ladder decides from the failure's reason (budget pressure overrides it).
    Decide { pressure: bool },
    /// Already decided: an escalation after a repeated proposal, or a stale plan (L3).
    Forced {
        level: Option<RepairLevel>,
        from: Option<RepairLevel>,
    },
}

/// The rung taken, and what the `repair.started` event says about it.
struct Chosen {
    level: Option<RepairLevel>,
    reason: ReplanReason,
    pressure: bool,
    from: Option<RepairLevel>,
}

/// Resolves `rung` against the ladder: a decision from the reason, or a forced rung (an L3
/// past its task-wide limit gives up).
fn choose(
    ladder: &RepairHistory,
    milestone_id: &str,
    failure: &Failure,
    rung: Rung,
    limits: &RepairLimits,
) -> Chosen {
    match rung {
        Rung::Decide { pressure } => {
            let reason = if pressure {
                ReplanReason::BudgetPressure
            } else {
                failure.reason
            };
            let level = match ladder.decide(milestone_id, reason, limits) {
                RepairDecision::Attempt { level, .. } => Some(level),
                RepairDecision::RetrySame { .. } | RepairDecision::GiveUp { .. } => None,
            };
            Chosen {
                level,
                reason,
                pressure,
                from: None,
            }
        }
        Rung::Forced { level, from } => {
            let level = match level {
                Some(RepairLevel::ReplanStrategy)
                    if ladder.replan_strategy >= limits.replan_strategy =>
                {
                    None
                }
                other => other,
            };
            Chosen {
                level,
                reason: failure.reason,
                pressure: false,
                from,
            }
        }
    }
}

/// The fingerprints of what just failed in `milestone_id`: its current step list, and the
/// list's tail from the failing step (what an L1 retry of that step would propose again).
fn failed_lists(state: &TaskState, milestone_id: &str, failure: &Failure) -> Vec<Fingerprint> {
    let Some(m) = state.plan.as_ref().and_then(|p| p.milestone(milestone_id)) else {
        return Vec::new();
    };
    let mut out = vec![of_steps(&m.steps)];
    if let Some(at) = failure
        .step
        .as_deref()
        .and_then(|id| m.steps.iter().position(|s| s.id == id))
    {
        out.push(of_steps(&m.steps[at..]));
    }
    out
}

/// An L3 for a milestone others depend on is a `dependency_failed` trigger: the failure the
/// strategic planner sees names the failed milestone and the blocked ones, and each blocked
/// milestone gets a `milestone.blocked` event.
fn dependency_trigger(
    state: &TaskState,
    milestone_id: &str,
    failure: &Failure,
    record: &mut Record,
) -> Option<(Failure, Vec<String>)> {
    if failure.reason.class() == FailureClass::Impossible {
        return None;
    }
    let blocked = blocked_by(state.plan.as_ref()?, milestone_id);
    if blocked.is_empty() {
        return None;
    }
    for id in &blocked {
        record.push(
            MILESTONE_BLOCKED,
            json!({"milestone": id, "dependency": milestone_id,
                   "reason": ReplanReason::DependencyFailed}),
        );
    }
    let trigger = Failure {
        reason: ReplanReason::DependencyFailed,
        detail: format!(
            "{} blocked: dependency {milestone_id} failed ({}: {})",
            blocked.join(", "),
            failure.reason.as_str(),
            failure.detail
        ),
        ..failure.clone()
    };
    Some((trigger, blocked))
}

/// Decides and records the next repair for `milestone_id`. Returns the rung (`None`: give up)
/// and the failure as it was recorded (for an L3, the trigger the strategic planner sees).
pub async fn start(
    cx: &Attempt,
    milestone_id: &str,
    failure: Failure,
    rung: Rung,
) -> Result<(Option<RepairLevel>, Failure), Halt> {
    let limits = limits(&cx.config);
    let (_, (level, failure)) = cx
        .journal
        .record(|state| {
            // What just ran failed for a non-transient reason: proposing it again escalates.
            let failed = failed_lists(state, milestone_id, &failure);
            state.ladder.failed(milestone_id, failed);
            let Chosen {
                level,
                reason,
                pressure,
                from,
            } = choose(&state.ladder, milestone_id, &failure, rung, &limits);
            match level {
                Some(RepairLevel::RetryStep) => state.metrics.repairs_retry_step += 1,
                Some(RepairLevel::ReplanMilestone) => state.metrics.repairs_replan_milestone += 1,
                Some(RepairLevel::ReplanStrategy) => state.metrics.repairs_replan_strategy += 1,
                None => {}
            }
            if !failure.executor && from.is_none() {
                // Steps ran as planned and the check still failed: the plan was wrong.
                state.metrics.planner_failures += 1;
            }
            let mut record = Record::default();
            let trigger = match level {
                Some(RepairLevel::ReplanStrategy) => {
                    dependency_trigger(state, milestone_id, &failure, &mut record)
                }
                _ => None,
            };
            let run = state.run_mut(milestone_id);
            run.repairs.levels.push(level);
            // A repaired list runs to its end: budget pressure starts repair, and repair is
            // under way (the ladder's limits bound it).
            run.pressured |= pressure || level.is_some_and(|l| l != RepairLevel::ReplanStrategy);
            run.failure = Some(failure.clone());
            run.pending_repair = level.filter(|l| *l != RepairLevel::ReplanStrategy);
            run.needs_steps = run.pending_repair.is_some();
            let (reason, detail, blocked) = match &trigger {
                Some((t, blocked)) => (t.reason, &t.detail, Some(blocked.clone())),
                None => (reason, &failure.detail, None),
            };
            record.push(
                REPAIR_STARTED,
                json!({"milestone": milestone_id, "level": rung_name(level), "reason": reason,
                       "class": reason.class(), "detail": detail, "step": failure.step,
                       "escalated_from": from, "budget_pressure": pressure,
                       "caused_by_seq": failure.seq,
                       "dependency": blocked.as_ref().map(|_| milestone_id), "blocked": blocked}),
            );
            let failure = trigger.map_or(failure, |(t, _)| t);
            Ok((record, (level, failure)))
        })
        .await?;
    Ok((level, failure))
}

/// A transient fault of `call` (a step id and its list's generation): while the ladder allows,
/// records an unchanged L1 retry and returns its backoff; `None` once the retries are spent
/// (the tool then counts as unavailable).
pub async fn retry_same(
    cx: &Attempt,
    milestone_id: &str,
    failure: &Failure,
    call: &str,
) -> Result<Option<u64>, Halt> {
    let limits = limits(&cx.config);
    let decision = cx
        .journal
        .read(|s| {
            s.ladder
                .decide(milestone_id, Fault::transient(call), &limits)
        })
        .await;
    let RepairDecision::RetrySame { retry, backoff_ms } = decision else {
        return Ok(None);
    };
    cx.journal
        .record(|state| {
            state.ladder.retrying(milestone_id, call);
            state.metrics.repairs_retry_step += 1;
            let run = state.run_mut(milestone_id);
            run.repairs.levels.push(Some(RepairLevel::RetryStep));
            run.failure = Some(failure.clone());
            let record = Record::event(
                REPAIR_STARTED,
                json!({"milestone": milestone_id, "level": RepairLevel::RetryStep,
                       "reason": failure.reason, "class": FailureClass::Transient,
                       "detail": failure.detail, "step": failure.step, "unchanged": true,
                       "retry": retry, "backoff_ms": backoff_ms, "escalated_from": null,
                       "budget_pressure": false, "caused_by_seq": failure.seq}),
            );
            Ok((record, ()))
        })
        .await?;
    Ok(Some(backoff_ms))
}

/// Raises a constraint from any source (a tool's answer now; a person's message to a running
/// task goes through the same function) inside the commit that observed it. A constraint the
/// plan did not know is recorded (`plan.constraint_raised`) and returned as the
/// `new_constraint` failure that asks for a new strategy; a known one returns `None`.
pub fn raise_constraint(
    state: &mut TaskState,
    constraint: Constraint,
    record: &mut Record,
) -> Option<Failure> {
    let (milestone, step) = match &constraint.source {
        ConstraintSource::Tool {
            milestone, step, ..
        } => (Some(milestone.clone()), Some(step.clone())),
        ConstraintSource::Person { .. } => (None, None),
    };
    let text = constraint.text.clone();
    let data = json!({"milestone": milestone, "step": step, "text": text,
                      "source": constraint.source});
    if !state.ladder.raise(constraint) {
        return None;
    }
    record.push(CONSTRAINT_RAISED, data);
    Some(Failure {
        step,
        ..Failure::of_plan(
            ReplanReason::NewConstraint,
            format!("a new constraint the plan did not know: {text}"),
        )
    })
}
