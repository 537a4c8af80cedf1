//! Applying the repair ladder: local repair before global replanning (first seed).
//!
//! The decisions are the domain's ([`crate::domain::repair::RepairHistory`]): L1 retries the
//! failing step with the error in context (at most 2), L2 asks for a new step list for the
//! milestone (at most 2), L3 re-plans the strategy (at most 1 per task, keeping finished work);
//! each reason starts at its lowest useful rung (budget pressure and a missing tool skip L1),
//! and a proposal that repeats what was tried closes its level and escalates (see
//! [`super::tactical`]). This module records each decision as a `repair.started` event, and
//! the plan version the repaired plan writes points at the failure that caused it.
//!
//! One rule is the engine's own: a tool that cannot be reached at all makes the plan stale,
//! which only a new strategy can route around, so that failure goes straight to L3.

use serde_json::json;

use crate::domain::event::kinds::REPAIR_STARTED;
use crate::domain::repair::{
    RepairDecision, RepairHistory, RepairLevel, RepairLimits, ReplanReason, rung_name,
};
use crate::engine::Halt;
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::checkpoint::{Failure, Record};

/// The ladder's limits from the engine's settings.
pub fn limits(config: &super::EngineSettings) -> RepairLimits {
    RepairLimits {
        retry_step: config.max_retry_step,
        replan_milestone: config.max_replan_milestone,
        replan_strategy: config.max_replan_strategy,
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
                RepairDecision::GiveUp { .. } => None,
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

/// Decides and records the next repair for `milestone_id`. Returns the rung (`None`: give up)
/// and the failure as it was recorded.
pub async fn start(
    cx: &Attempt,
    milestone_id: &str,
    failure: Failure,
    rung: Rung,
) -> Result<(Option<RepairLevel>, Failure), Halt> {
    let limits = limits(&cx.config);
    let (_, level) = cx
        .journal
        .record(|state| {
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
            let run = state.run_mut(milestone_id);
            run.repairs.levels.push(level);
            run.pressured |= pressure;
            run.failure = Some(failure.clone());
            run.pending_repair = level.filter(|l| *l != RepairLevel::ReplanStrategy);
            run.needs_steps = run.pending_repair.is_some();
            let record = Record::event(
                REPAIR_STARTED,
                json!({"milestone": milestone_id, "level": rung_name(level), "reason": reason,
                       "detail": failure.detail, "step": failure.step,
                       "escalated_from": from, "budget_pressure": pressure,
                       "caused_by_seq": failure.seq}),
            );
            Ok((record, level))
        })
        .await?;
    Ok((level, failure))
}
