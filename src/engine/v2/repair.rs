//! Applying the repair ladder: local repair before global replanning (first seed).
//!
//! L1 retries the failing step with the error in context (at most `max_retry_step`), L2 asks
//! for a new step list for the milestone (at most `max_replan_milestone`), L3 re-plans the
//! strategy (at most `max_replan_strategy` per task, keeping finished work). Two guards stop
//! thrash: the per-level limits, and fingerprints (a repeated proposal escalates, see
//! [`super::tactical`]). Budget pressure (the milestone at or past the monitor's fraction with
//! its check failing) skips L1: retrying a step is "letting the executor keep trying", which the
//! seed says the monitor must stop doing at that point.
//!
//! Each decision is a `repair.started` event; the plan version written by the repaired plan
//! points at the event that caused the repair.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::V2Config;
use super::checkpoint::{Failure, Record, RepairHistory};
use super::context::Cx;
use crate::engine::Halt;

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
}

/// What the ladder knows when it decides.
#[derive(Debug, Clone, Copy)]
pub struct Situation<'a> {
    pub history: &'a RepairHistory,
    pub pressure: bool,
    pub strategy_replans: u32,
    /// Levels ruled out by a repeated fingerprint at this failure.
    pub floor: Option<Level>,
}

impl Situation<'_> {
    /// The ladder never climbs down: the last level taken for this milestone is the lowest
    /// one still on offer.
    fn last_level(&self) -> Option<Level> {
        self.history.levels.last().and_then(|l| match l.as_str() {
            "retry_step" => Some(Level::RetryStep),
            "replan_milestone" => Some(Level::ReplanMilestone),
            "replan_strategy" => Some(Level::ReplanStrategy),
            _ => None,
        })
    }
}

/// The next rung: the lowest level still allowed, above `floor`.
pub fn decide(config: &V2Config, s: Situation<'_>) -> Level {
    let last = s.last_level();
    let above = |level: Level| {
        s.floor.is_none_or(|floor| rank(level) > rank(floor))
            && last.is_none_or(|last| rank(level) >= rank(last))
    };
    if above(Level::RetryStep) && !s.pressure && s.history.retry_step < config.max_retry_step {
        return Level::RetryStep;
    }
    if above(Level::ReplanMilestone) && s.history.replan_milestone < config.max_replan_milestone {
        return Level::ReplanMilestone;
    }
    if above(Level::ReplanStrategy) && s.strategy_replans < config.max_replan_strategy {
        return Level::ReplanStrategy;
    }
    Level::GiveUp
}

fn rank(level: Level) -> u8 {
    match level {
        Level::RetryStep => 1,
        Level::ReplanMilestone => 2,
        Level::ReplanStrategy => 3,
        Level::GiveUp => 4,
    }
}

/// Decides and records the next repair for `milestone_id`. Returns the level and the failure
/// with the `repair.started` event's seq (the cause of the plan version the repair writes).
pub async fn start(
    cx: &Cx,
    milestone_id: &str,
    failure: Failure,
    pressure: bool,
    floor: Option<Level>,
) -> Result<(Level, Failure), Halt> {
    let (applied, level) = cx
        .journal
        .record(|state| {
            let history = state
                .runs
                .get(milestone_id)
                .map(|r| r.repairs.clone())
                .unwrap_or_default();
            let level = decide(
                &cx.config,
                Situation {
                    history: &history,
                    pressure,
                    strategy_replans: state.strategy_replans,
                    floor,
                },
            );
            match level {
                Level::RetryStep => state.metrics.repairs_retry_step += 1,
                Level::ReplanMilestone => state.metrics.repairs_replan_milestone += 1,
                Level::ReplanStrategy => state.metrics.repairs_replan_strategy += 1,
                Level::GiveUp => {}
            }
            if !failure.executor && floor.is_none() {
                // Steps ran as planned and the check still failed: the plan was wrong.
                state.metrics.planner_failures += 1;
            }
            let run = state.run_mut(milestone_id);
            match level {
                Level::RetryStep => run.repairs.retry_step += 1,
                Level::ReplanMilestone => run.repairs.replan_milestone += 1,
                _ => {}
            }
            run.repairs.levels.push(level.as_str().into());
            run.pressured |= pressure;
            run.failure = Some(failure.clone());
            run.pending_repair = matches!(level, Level::RetryStep | Level::ReplanMilestone)
                .then(|| level.as_str().to_string());
            run.needs_steps = run.pending_repair.is_some();
            let record = Record::event(
                REPAIR_STARTED,
                json!({"milestone": milestone_id, "level": level, "reason": failure.reason,
                       "detail": failure.detail, "step": failure.step,
                       "escalated_from": floor, "budget_pressure": pressure,
                       "caused_by_seq": failure.seq}),
            );
            Ok((record, level))
        })
        .await?;
    let failure = Failure {
        seq: Some(applied.last_seq),
        ..failure
    };
    Ok((level, failure))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn situation(history: &RepairHistory) -> Situation<'_> {
        Situation {
            history,
            pressure: false,
            strategy_replans: 0,
            floor: None,
        }
    }

    #[test]
    fn the_ladder_climbs_in_order_and_ends() {
        let config = V2Config::default();
        let mut history = RepairHistory::default();
        assert_eq!(decide(&config, situation(&history)), Level::RetryStep);
        history.retry_step = 2;
        assert_eq!(decide(&config, situation(&history)), Level::ReplanMilestone);
        // After L2 the ladder does not go back to L1, even with L1 attempts left.
        let mut climbed = RepairHistory::default();
        climbed.levels.push("replan_milestone".into());
        climbed.replan_milestone = 1;
        assert_eq!(decide(&config, situation(&climbed)), Level::ReplanMilestone);
        history.replan_milestone = 2;
        assert_eq!(decide(&config, situation(&history)), Level::ReplanStrategy);
        let spent = Situation {
            strategy_replans: 1,
            ..situation(&history)
        };
        assert_eq!(decide(&config, spent), Level::GiveUp);
    }

    #[test]
    fn pressure_and_repeats_escalate() {
        let config = V2Config::default();
        let history = RepairHistory::default();
        let pressed = Situation {
            pressure: true,
            ..situation(&history)
        };
        assert_eq!(decide(&config, pressed), Level::ReplanMilestone);
        let repeated = Situation {
            floor: Some(Level::ReplanMilestone),
            ..situation(&history)
        };
        assert_eq!(decide(&config, repeated), Level::ReplanStrategy);
    }
}
