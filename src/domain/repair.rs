//! The repair ladder: local repair before global replanning, as a pure state machine.
//!
//! When a milestone fails, v1 replans everything. Here repair escalates through three levels and
//! stops at the first that works: L1 retries the step with the error in context, L2 re-plans the
//! milestone's steps, L3 re-plans the strategy (keeping finished work). Two guards stop repair
//! loops: each level has an attempt limit, and every proposal is fingerprinted; a proposal the
//! ladder has already seen escalates instead of being tried again, and the level that repeated
//! itself is considered exhausted for that milestone (so the ladder never climbs back down into
//! it).
//!
//! The engine drives it in three moves: [`RepairHistory::decide`] on a failure gives the level
//! to try (or give up); the engine asks the planner for a proposal at that level and passes its
//! fingerprint to [`RepairHistory::propose`], which accepts it (counting the attempt), escalates,
//! or gives up. The history is plain data, so it is checkpointed with the task and survives a
//! resume.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::fingerprint::Fingerprint;

/// The rungs of the ladder, lowest first.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RepairLevel {
    RetryStep,
    ReplanMilestone,
    ReplanStrategy,
}

impl RepairLevel {
    pub const ALL: [RepairLevel; 3] = [
        RepairLevel::RetryStep,
        RepairLevel::ReplanMilestone,
        RepairLevel::ReplanStrategy,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RepairLevel::RetryStep => "retry_step",
            RepairLevel::ReplanMilestone => "replan_milestone",
            RepairLevel::ReplanStrategy => "replan_strategy",
        }
    }

    pub fn parse(text: &str) -> Option<RepairLevel> {
        Self::ALL.into_iter().find(|l| l.as_str() == text)
    }

    fn above(self) -> impl Iterator<Item = RepairLevel> {
        Self::ALL.into_iter().filter(move |l| *l > self)
    }
}

/// The name of the end of the ladder, where a rung is recorded as `Option<RepairLevel>`.
pub const GIVE_UP: &str = "give_up";

/// A rung as it is recorded: a level's name, or [`GIVE_UP`] for `None`.
pub fn rung_name(rung: Option<RepairLevel>) -> &'static str {
    rung.map_or(GIVE_UP, RepairLevel::as_str)
}

/// Reads a [`rung_name`] back: `Some(None)` is giving up, `None` an unknown name.
pub fn parse_rung(text: &str) -> Option<Option<RepairLevel>> {
    if text == GIVE_UP {
        Some(None)
    } else {
        RepairLevel::parse(text).map(Some)
    }
}

/// Why the current plan (or step list) no longer holds: the explicit replan triggers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReplanReason {
    /// A milestone this one depends on failed or was shown wrong.
    DependencyFailed,
    /// The goal or the world gained a constraint the plan does not respect.
    NewConstraint,
    /// A tool the steps need is gone or refusing (the plan is stale).
    ToolUnavailable,
    /// A step returned an error or something the plan did not expect.
    UnexpectedObservation,
    /// Every milestone is done but the goal-level verifier says the goal is not met.
    PlanExhaustedButGoalUnmet,
    /// The milestone's acceptance check failed.
    CheckFailed,
    /// The milestone used `repair_at` of its allocation with its check not passing.
    BudgetPressure,
}

impl ReplanReason {
    pub const ALL: [ReplanReason; 7] = [
        ReplanReason::DependencyFailed,
        ReplanReason::NewConstraint,
        ReplanReason::ToolUnavailable,
        ReplanReason::UnexpectedObservation,
        ReplanReason::PlanExhaustedButGoalUnmet,
        ReplanReason::CheckFailed,
        ReplanReason::BudgetPressure,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ReplanReason::DependencyFailed => "dependency_failed",
            ReplanReason::NewConstraint => "new_constraint",
            ReplanReason::ToolUnavailable => "tool_unavailable",
            ReplanReason::UnexpectedObservation => "unexpected_observation",
            ReplanReason::PlanExhaustedButGoalUnmet => "plan_exhausted_but_goal_unmet",
            ReplanReason::CheckFailed => "check_failed",
            ReplanReason::BudgetPressure => "budget_pressure",
        }
    }

    pub fn parse(text: &str) -> Option<ReplanReason> {
        Self::ALL.into_iter().find(|r| r.as_str() == text)
    }

    /// The lowest rung that can address this reason. A step error or a failed check may be a
    /// typo or a transient fault (retry); a missing tool or budget pressure needs different steps
    /// (retrying the same approach would spend the rest); a failed dependency, a new constraint
    /// or an unmet goal means the milestones themselves are wrong.
    pub fn lowest_level(self) -> RepairLevel {
        match self {
            ReplanReason::UnexpectedObservation | ReplanReason::CheckFailed => {
                RepairLevel::RetryStep
            }
            ReplanReason::ToolUnavailable | ReplanReason::BudgetPressure => {
                RepairLevel::ReplanMilestone
            }
            ReplanReason::DependencyFailed
            | ReplanReason::NewConstraint
            | ReplanReason::PlanExhaustedButGoalUnmet => RepairLevel::ReplanStrategy,
        }
    }
}

/// Attempts allowed per level: L1 and L2 per milestone, L3 per task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairLimits {
    pub retry_step: u32,
    pub replan_milestone: u32,
    pub replan_strategy: u32,
}

impl Default for RepairLimits {
    fn default() -> Self {
        Self {
            retry_step: 2,
            replan_milestone: 2,
            replan_strategy: 1,
        }
    }
}

impl RepairLimits {
    fn of(&self, level: RepairLevel) -> u32 {
        match level {
            RepairLevel::RetryStep => self.retry_step,
            RepairLevel::ReplanMilestone => self.replan_milestone,
            RepairLevel::ReplanStrategy => self.replan_strategy,
        }
    }
}

/// One milestone's repair record.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct MilestoneRepairs {
    pub retry_step: u32,
    pub replan_milestone: u32,
    /// Levels closed for this milestone because they repeated a proposal.
    pub exhausted: BTreeSet<RepairLevel>,
    /// Fingerprints of L1 proposals. An identical retry is allowed once (transient faults), not
    /// twice.
    pub retried: BTreeSet<Fingerprint>,
    /// Fingerprints of every step list executed for this milestone (the first tactical list and
    /// every accepted repair); an L2 proposal matching one of them escalates.
    pub executed: BTreeSet<Fingerprint>,
}

/// The task's repair record: per-milestone L1/L2 and task-wide L3.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct RepairHistory {
    pub milestones: BTreeMap<String, MilestoneRepairs>,
    pub replan_strategy: u32,
    /// Fingerprints of every plan version (see [`super::fingerprint::of_plan`]).
    pub plans: BTreeSet<Fingerprint>,
}

/// What to do about a failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum RepairDecision {
    /// Ask for a proposal at this level.
    Attempt {
        level: RepairLevel,
        reason: ReplanReason,
    },
    /// Every admissible level is used up: the milestone fails.
    GiveUp { reason: ReplanReason },
}

/// The verdict on a proposal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum ProposalVerdict {
    /// New: execute it (the attempt is counted).
    Accept,
    /// Seen before: ask for a proposal at this higher level instead.
    Escalate { to: RepairLevel },
    /// Seen before and nothing above is left.
    GiveUp,
}

impl RepairHistory {
    /// Records the first tactical step list of a milestone, so that an L2 proposal repeating it
    /// escalates.
    pub fn record_steps(&mut self, milestone: &str, fingerprint: Fingerprint) {
        self.entry(milestone).executed.insert(fingerprint);
    }

    /// Records a plan version (the initial plan, or one written outside the ladder).
    pub fn record_plan(&mut self, fingerprint: Fingerprint) {
        self.plans.insert(fingerprint);
    }

    /// The lowest level at or above the reason's lowest rung that still has attempts left.
    pub fn decide(
        &self,
        milestone: &str,
        reason: ReplanReason,
        limits: &RepairLimits,
    ) -> RepairDecision {
        let from = reason.lowest_level();
        match RepairLevel::ALL
            .into_iter()
            .filter(|l| *l >= from)
            .find(|l| self.available(milestone, *l, limits))
        {
            Some(level) => RepairDecision::Attempt { level, reason },
            None => RepairDecision::GiveUp { reason },
        }
    }

    /// Judges a proposal at `level`. A new one is accepted and counted; a repeated one closes
    /// `level` for this milestone and escalates to the next level with attempts left.
    pub fn propose(
        &mut self,
        milestone: &str,
        level: RepairLevel,
        fingerprint: Fingerprint,
        limits: &RepairLimits,
    ) -> ProposalVerdict {
        let repeated = match level {
            RepairLevel::RetryStep => self.entry(milestone).retried.contains(&fingerprint),
            RepairLevel::ReplanMilestone => self.entry(milestone).executed.contains(&fingerprint),
            RepairLevel::ReplanStrategy => self.plans.contains(&fingerprint),
        };
        if !repeated && self.available(milestone, level, limits) {
            let entry = self.entry(milestone);
            match level {
                RepairLevel::RetryStep => {
                    entry.retry_step += 1;
                    entry.retried.insert(fingerprint.clone());
                    entry.executed.insert(fingerprint);
                }
                RepairLevel::ReplanMilestone => {
                    entry.replan_milestone += 1;
                    entry.executed.insert(fingerprint);
                }
                RepairLevel::ReplanStrategy => {
                    self.replan_strategy += 1;
                    self.plans.insert(fingerprint);
                }
            }
            return ProposalVerdict::Accept;
        }
        if repeated && level != RepairLevel::ReplanStrategy {
            self.entry(milestone).exhausted.insert(level);
        }
        match level
            .above()
            .find(|l| self.available(milestone, *l, limits))
        {
            Some(to) => ProposalVerdict::Escalate { to },
            None => ProposalVerdict::GiveUp,
        }
    }

    /// Attempts used at `level` (L3 counts task-wide).
    pub fn attempts(&self, milestone: &str, level: RepairLevel) -> u32 {
        let entry = self.milestones.get(milestone);
        match level {
            RepairLevel::RetryStep => entry.map_or(0, |e| e.retry_step),
            RepairLevel::ReplanMilestone => entry.map_or(0, |e| e.replan_milestone),
            RepairLevel::ReplanStrategy => self.replan_strategy,
        }
    }

    fn available(&self, milestone: &str, level: RepairLevel, limits: &RepairLimits) -> bool {
        let closed = self
            .milestones
            .get(milestone)
            .is_some_and(|e| e.exhausted.contains(&level));
        !closed && self.attempts(milestone, level) < limits.of(level)
    }

    fn entry(&mut self, milestone: &str) -> &mut MilestoneRepairs {
        self.milestones.entry(milestone.to_string()).or_default()
    }
}

#[cfg(test)]
#[path = "repair_tests.rs"]
mod tests;
