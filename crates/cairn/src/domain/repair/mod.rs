//! The repair ladder: local repair before global replanning, as a pure state machine.
//!
//! When a milestone fails, v1 replans everything. Here repair escalates through three levels and
//! stops at the first that works: L1 retries the step, L2 re-plans the milestone's steps, L3
//! re-plans the strategy (keeping finished work). The failure's class decides the lowest rung
//! ([`FailureClass`]): a transient fault (timeout, 5xx, 429, reset) is retried unchanged, with
//! backoff, a bounded number of times, and that is not thrash; a wrong result starts at L1 with
//! the error in context (the error often makes the fix obvious: a typo in a path); an impossible
//! milestone or a wrong assumption starts at L3. The reason ([`ReplanReason`]) can raise the rung
//! further (a tool that stays unavailable, budget pressure: L2).
//!
//! Two guards stop repair loops: each level has an attempt limit, and every proposal is
//! fingerprinted. A proposal whose fingerprint already failed for a non-transient reason
//! escalates instead of being tried again, at every level including L3, and the level that
//! repeated itself is closed for that milestone (the ladder never climbs back down into it).
//!
//! The engine drives it in these moves: [`RepairHistory::decide`] on a failure gives the rung
//! (retry unchanged, a level to ask a proposal for, or give up); [`RepairHistory::failed`]
//! records what failed; [`RepairHistory::propose`] (L1/L2) and [`RepairHistory::propose_plan`]
//! (L3) judge a proposal's fingerprint. Replan triggers are data too: a constraint from any
//! source goes through [`RepairHistory::raise`]. The history is plain data, so it is
//! checkpointed with the task and survives a resume.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

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

    /// The levels above this one, lowest first.
    pub fn above(self) -> impl Iterator<Item = RepairLevel> {
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

    /// The lowest rung that can address this reason. A step error or a failed check may have an
    /// obvious fix (retry with the error in context); a tool that stayed unavailable through its
    /// transient retries, or budget pressure, needs different steps (retrying the same approach
    /// would spend the rest); a failed dependency, a new constraint or an unmet goal means the
    /// milestones themselves are wrong.
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

    /// The class of a failure with this reason. A transient fault is classed by the port that
    /// saw it (the failure's kind), never from a reason.
    pub fn class(self) -> FailureClass {
        match self {
            ReplanReason::DependencyFailed
            | ReplanReason::NewConstraint
            | ReplanReason::PlanExhaustedButGoalUnmet => FailureClass::Impossible,
            _ => FailureClass::WrongResult,
        }
    }
}

/// What kind of failure it is; it decides the lowest rung of the ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// Repeating the same call may succeed: a timeout, HTTP 5xx or 429, a reset connection.
    Transient,
    /// The call or the steps produced the wrong thing: a tool's own error, a failed check.
    WrongResult,
    /// The milestone cannot be done as planned: a failed dependency, a new constraint, an
    /// unmet goal after every milestone passed.
    Impossible,
}

impl FailureClass {
    pub const ALL: [FailureClass; 3] = [
        FailureClass::Transient,
        FailureClass::WrongResult,
        FailureClass::Impossible,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Transient => "transient",
            FailureClass::WrongResult => "wrong_result",
            FailureClass::Impossible => "impossible",
        }
    }

    /// The lowest rung for the class: L1 (a transient fault unchanged, a wrong result with the
    /// error in context) or L3.
    pub fn lowest_level(self) -> RepairLevel {
        match self {
            FailureClass::Transient | FailureClass::WrongResult => RepairLevel::RetryStep,
            FailureClass::Impossible => RepairLevel::ReplanStrategy,
        }
    }
}

/// A failure as the ladder sees it: its class, its reason, and for a transient fault the
/// identity of the call that failed (its retries are counted per call).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Fault {
    pub class: FailureClass,
    pub reason: ReplanReason,
    /// The failed call's identity (milestone-local: step id and step-list generation).
    pub call: Option<String>,
}

impl Fault {
    /// A transient fault of the call `call` (its reason is the observation it made).
    pub fn transient(call: impl Into<String>) -> Fault {
        Fault {
            class: FailureClass::Transient,
            reason: ReplanReason::UnexpectedObservation,
            call: Some(call.into()),
        }
    }

    /// The lowest rung: the higher of the class's and the reason's.
    pub fn lowest_level(&self) -> RepairLevel {
        match self.class {
            FailureClass::Transient => RepairLevel::RetryStep,
            class => class.lowest_level().max(self.reason.lowest_level()),
        }
    }
}

impl From<ReplanReason> for Fault {
    fn from(reason: ReplanReason) -> Fault {
        Fault {
            class: reason.class(),
            reason,
            call: None,
        }
    }
}

/// Attempts allowed per level: L1 and L2 per milestone, L3 per task; and the unchanged retries
/// of a transient fault, per call, with their backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairLimits {
    pub retry_step: u32,
    pub replan_milestone: u32,
    pub replan_strategy: u32,
    /// Unchanged retries of one call after a transient fault (they are not L1 proposals and
    /// do not use up `retry_step`).
    pub transient_retries: u32,
    /// The first transient retry's delay; each further one doubles it.
    pub transient_backoff_ms: u64,
}

impl Default for RepairLimits {
    fn default() -> Self {
        Self {
            retry_step: 2,
            replan_milestone: 2,
            replan_strategy: 1,
            transient_retries: 2,
            transient_backoff_ms: 200,
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

    /// The delay before transient retry `retry` (from 1): base, 2 x base, 4 x base, ...
    pub fn backoff_ms(&self, retry: u32) -> u64 {
        let doublings = retry.saturating_sub(1).min(16);
        self.transient_backoff_ms.saturating_mul(1u64 << doublings)
    }
}

/// What to do about a failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum RepairDecision {
    /// A transient fault: run the same call again, unchanged, after `backoff_ms` (an L1 rung
    /// that asks no planner). `retry` counts this call's transient retries from 1.
    RetrySame { retry: u32, backoff_ms: u64 },
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
    /// It already failed: ask for a proposal at this higher level instead.
    Escalate { to: RepairLevel },
    /// It already failed and nothing above is left.
    GiveUp,
}

mod history;
pub use history::{
    Constraint, ConstraintSource, MilestoneRepairs, RepairHistory, blocked_by, normalize,
};

#[cfg(test)]
mod tests;
