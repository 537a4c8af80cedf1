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

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::domain::repair::{RepairDecision, RepairLevel, RepairLimits, ReplanReason};
use crate::engine::Halt;
use crate::engine::runtime::attempt::Attempt;
use crate::engine::runtime::checkpoint::{Failure, Record};

pub const REPAIR_STARTED: &str = "repair.started";

/// A rung of the ladder, or the end of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    RetryStep,
    ReplanMilestone,
    ReplanStrategy,
    GiveUp,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::RetryStep => "retry_step",
            Level::ReplanMilestone => "replan_milestone",
            Level::ReplanStrategy => "replan_strategy",
            Level::GiveUp => "give_up",
        }
    }

    pub fn of(level: RepairLevel) -> Level {
        match level {
            RepairLevel::RetryStep => Level::RetryStep,
            RepairLevel::ReplanMilestone => Level::ReplanMilestone,
            RepairLevel::ReplanStrategy => Level::ReplanStrategy,
        }
    }

    pub fn domain(self) -> Option<RepairLevel> {
        match self {
            Level::RetryStep => Some(RepairLevel::RetryStep),
            Level::ReplanMilestone => Some(RepairLevel::ReplanMilestone),
            Level::ReplanStrategy => Some(RepairLevel::ReplanStrategy),
            Level::GiveUp => None,
        }
    }
}

/// The ladder's limits from the engine's settings.
pub fn limits(config: &super::EngineSettings) -> RepairLimits {
    RepairLimits {
        retry_step: config.max_retry_step,
        replan_milestone: config.max_replan_milestone,
        replan_strategy: config.max_replan_strategy,
    }
}

/// How the next rung is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rung {
    /// The ladder decides from the failure's reason (budget pressure overrides it).
    Decide { pressure: bool },
    /// Already decided: an escalation after a repeated proposal, or a stale plan (L3).
    Forced { level: Level, from: Option<Level> },
}

/// Decides and records the next repair for `milestone_id`. Returns the level and the failure
/// as it was recorded.
pub async fn start(
    cx: &Attempt,
    milestone_id: &str,
    failure: Failure,
    rung: Rung,
) -> Result<(Level, Failure), Halt> {
    let limits = limits(&cx.config);
    let (_, level) = cx
        .journal
        .record(|state| {
            let (level, reason, pressure, from) = match rung {
                Rung::Decide { pressure } => {
                    let reason = if pressure {
                        ReplanReason::BudgetPressure
                    } else {
                        ReplanReason::parse(&failure.reason)
                            .unwrap_or(ReplanReason::UnexpectedObservation)
                    };
                    let level = match state.ladder.decide(milestone_id, reason, &limits) {
                        RepairDecision::Attempt { level, .. } => Level::of(level),
                        RepairDecision::GiveUp { .. } => Level::GiveUp,
                    };
                    (level, reason.as_str(), pressure, None)
                }
                Rung::Forced { level, from } => {
                    let level = match level {
                        Level::ReplanStrategy
                            if state.ladder.replan_strategy >= limits.replan_strategy =>
                        {
                            Level::GiveUp
                        }
                        other => other,
                    };
                    (level, failure.reason.as_str(), false, from)
                }
            };
            match level {
                Level::RetryStep => state.metrics.repairs_retry_step += 1,
                Level::ReplanMilestone => state.metrics.repairs_replan_milestone += 1,
                Level::ReplanStrategy => state.metrics.repairs_replan_strategy += 1,
                Level::GiveUp => {}
            }
            if !failure.executor && from.is_none() {
                // Steps ran as planned and the check still failed: the plan was wrong.
                state.metrics.planner_failures += 1;
            }
            let run = state.run_mut(milestone_id);
            run.repairs.levels.push(level.as_str().into());
            run.pressured |= pressure;
            run.failure = Some(failure.clone());
            run.pending_repair = matches!(level, Level::RetryStep | Level::ReplanMilestone)
                .then(|| level.as_str().to_string());
            run.needs_steps = run.pending_repair.is_some();
            let record = Record::event(
                REPAIR_STARTED,
                json!({"milestone": milestone_id, "level": level, "reason": reason,
                       "detail": failure.detail, "step": failure.step,
                       "escalated_from": from, "budget_pressure": pressure,
                       "caused_by_seq": failure.seq}),
            );
            Ok((record, level))
        })
        .await?;
    Ok((level, failure))
}
