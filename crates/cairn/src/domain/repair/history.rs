//! The ladder's record (per milestone L1/L2, task-wide L3, transient retries, what failed, the
//! constraints raised) and the decisions taken on it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{
    FailureClass, Fault, ProposalVerdict, RepairDecision, RepairLevel, RepairLimits, ReplanReason,
};
use crate::domain::plan::fingerprint::Fingerprint;
use crate::domain::plan::{MilestoneStatus, Plan};

/// One milestone's repair record.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct MilestoneRepairs {
    pub retry_step: u32,
    pub replan_milestone: u32,
    /// Levels closed for this milestone because they repeated a failed proposal.
    pub exhausted: BTreeSet<RepairLevel>,
    /// Unchanged retries after a transient fault, per call (step id and generation).
    #[serde(default)]
    pub transient: BTreeMap<String, u32>,
    /// Fingerprints of the step lists, and of the failing tails of step lists, that failed for
    /// a non-transient reason; an L1 or L2 proposal matching one of them escalates.
    #[serde(default)]
    pub failed: BTreeSet<Fingerprint>,
}

/// The task's repair record: per-milestone L1/L2 and task-wide L3.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct RepairHistory {
    pub milestones: BTreeMap<String, MilestoneRepairs>,
    pub replan_strategy: u32,
    /// Fingerprints of the plans an L3 replaced, as they were installed (see
    /// [`crate::domain::plan::fingerprint::of_plan`]): a new plan identical to one of them, from the
    /// same starting point, is not run again.
    #[serde(default)]
    pub failed_plans: BTreeSet<Fingerprint>,
    /// The fingerprint of the plan version in force, as it was installed.
    #[serde(default)]
    pub installed_plan: Option<Fingerprint>,
    /// Constraints raised while the task ran, in order (the strategic planner sees them).
    #[serde(default)]
    pub constraints: Vec<Constraint>,
}

/// Where a constraint came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ConstraintSource {
    /// A tool's answer carried it (`output.constraint`, see docs/tools.md).
    Tool {
        milestone: String,
        step: String,
        tool: String,
    },
    /// A person said it to the running task.
    Person { author: String },
}

/// A constraint the plan did not know when it was written: a `new_constraint` trigger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Constraint {
    pub text: String,
    pub source: ConstraintSource,
}

/// A constraint's text as it is compared: trimmed, lowercase, inner whitespace collapsed.
pub fn normalize(text: &str) -> String {
    text.split_whitespace()
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The milestones of `plan` not done that depend on `failed`, directly or through others, in
/// plan order: what a failed milestone blocks.
pub fn blocked_by(plan: &Plan, failed: &str) -> Vec<String> {
    let mut blocked: BTreeSet<&str> = BTreeSet::from([failed]);
    loop {
        let before = blocked.len();
        for m in &plan.milestones {
            if m.depends_on.iter().any(|d| blocked.contains(d.as_str())) {
                blocked.insert(m.id.as_str());
            }
        }
        if blocked.len() == before {
            break;
        }
    }
    plan.milestones
        .iter()
        .filter(|m| m.id != failed && blocked.contains(m.id.as_str()))
        .filter(|m| m.status != MilestoneStatus::Done)
        .map(|m| m.id.clone())
        .collect()
}

impl RepairHistory {
    /// The rung for a failure. A transient fault with retries left for its call is retried
    /// unchanged; once they are spent the tool counts as unavailable. Otherwise: the lowest
    /// level at or above the fault's lowest rung that still has attempts left.
    pub fn decide(
        &self,
        milestone: &str,
        fault: impl Into<Fault>,
        limits: &RepairLimits,
    ) -> RepairDecision {
        let fault = fault.into();
        if fault.class == FailureClass::Transient {
            let used = fault.call.as_deref().map_or(limits.transient_retries, |c| {
                self.transient_retries(milestone, c)
            });
            if used < limits.transient_retries {
                return RepairDecision::RetrySame {
                    retry: used + 1,
                    backoff_ms: limits.backoff_ms(used + 1),
                };
            }
            return self.decide(milestone, ReplanReason::ToolUnavailable, limits);
        }
        let from = fault.lowest_level();
        match RepairLevel::ALL
            .into_iter()
            .filter(|l| *l >= from)
            .find(|l| self.available(milestone, *l, limits))
        {
            Some(level) => RepairDecision::Attempt {
                level,
                reason: fault.reason,
            },
            None => RepairDecision::GiveUp {
                reason: fault.reason,
            },
        }
    }

    /// Counts one unchanged retry of `call` after a transient fault; returns the count.
    pub fn retrying(&mut self, milestone: &str, call: &str) -> u32 {
        let count = self
            .entry(milestone)
            .transient
            .entry(call.to_string())
            .or_default();
        *count += 1;
        *count
    }

    /// Unchanged retries of `call` so far.
    pub fn transient_retries(&self, milestone: &str, call: &str) -> u32 {
        self.milestones
            .get(milestone)
            .and_then(|e| e.transient.get(call))
            .copied()
            .unwrap_or(0)
    }

    /// Records step lists (or failing tails) of `milestone` that failed for a non-transient
    /// reason: proposing one of them again escalates.
    pub fn failed(&mut self, milestone: &str, fingerprints: impl IntoIterator<Item = Fingerprint>) {
        self.entry(milestone).failed.extend(fingerprints);
    }

    /// Whether `fingerprint` is one of `milestone`'s failed step lists (read only).
    pub fn failed_before(&self, milestone: &str, fingerprint: &Fingerprint) -> bool {
        self.milestones
            .get(milestone)
            .is_some_and(|e| e.failed.contains(fingerprint))
    }

    /// Judges a proposal at `level`. A new one is accepted and counted (L1, L2); one that
    /// already failed closes `level` for this milestone and escalates to the next level with
    /// attempts left. An L3 proposal is judged by [`Self::propose_plan`].
    pub fn propose(
        &mut self,
        milestone: &str,
        level: RepairLevel,
        fingerprint: Fingerprint,
        limits: &RepairLimits,
    ) -> ProposalVerdict {
        if level == RepairLevel::ReplanStrategy {
            return self.propose_plan(&fingerprint);
        }
        let repeated = self.entry(milestone).failed.contains(&fingerprint);
        if !repeated && self.available(milestone, level, limits) {
            let entry = self.entry(milestone);
            match level {
                RepairLevel::RetryStep => entry.retry_step += 1,
                _ => entry.replan_milestone += 1,
            }
            return ProposalVerdict::Accept;
        }
        if repeated {
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

    /// Counts one attempt at `level` (L1 or L2) when it has attempts left; `false` when not.
    /// For a proposal the engine made new by cutting what failed ([`Self::propose`] judges the
    /// others).
    pub fn take_attempt(
        &mut self,
        milestone: &str,
        level: RepairLevel,
        limits: &RepairLimits,
    ) -> bool {
        if level == RepairLevel::ReplanStrategy || !self.available(milestone, level, limits) {
            return false;
        }
        let entry = self.entry(milestone);
        match level {
            RepairLevel::RetryStep => entry.retry_step += 1,
            _ => entry.replan_milestone += 1,
        }
        true
    }

    /// Starts an L3 (counted task-wide before the planner is asked, so a resumed task never
    /// gets a second one) and records the plan it replaces as failed. The new strategy starts
    /// with fresh L1/L2 attempts and no closed rungs (it does not inherit the old plan's), but
    /// every fingerprint that failed still escalates; L3's own limit bounds the whole.
    pub fn begin_replan_strategy(&mut self, replaced: Option<Fingerprint>) {
        self.replan_strategy += 1;
        self.failed_plans.extend(replaced);
        self.fresh_milestones();
    }

    /// Starts a replan a person's message asked for: the new plan's milestones start with a
    /// fresh ladder, as after L3, but the plan replaced did not fail and no L3 is used up.
    pub fn begin_steering(&mut self) {
        self.fresh_milestones();
    }

    fn fresh_milestones(&mut self) {
        for entry in self.milestones.values_mut() {
            entry.retry_step = 0;
            entry.replan_milestone = 0;
            entry.exhausted.clear();
        }
    }

    /// Records the plan version now in force (its fingerprint as installed).
    pub fn plan_installed(&mut self, fingerprint: Fingerprint) {
        self.installed_plan = Some(fingerprint);
    }

    /// Judges an L3 proposal: a plan identical to one that failed is not run again, and there
    /// is no rung above L3 to escalate to.
    pub fn propose_plan(&self, fingerprint: &Fingerprint) -> ProposalVerdict {
        if self.failed_plans.contains(fingerprint) {
            ProposalVerdict::GiveUp
        } else {
            ProposalVerdict::Accept
        }
    }

    /// Raises a constraint from any source (a tool's answer, a person). `true` when the plan
    /// did not know it yet: that is a `new_constraint` trigger; a known one changes nothing.
    pub fn raise(&mut self, constraint: Constraint) -> bool {
        let text = normalize(&constraint.text);
        if text.is_empty() || self.constraints.iter().any(|c| normalize(&c.text) == text) {
            return false;
        }
        self.constraints.push(constraint);
        true
    }

    /// The raised constraints' texts, in order: what every later plan, step list and goal
    /// verdict is shown (`constraints` in a model's input).
    pub fn constraint_texts(&self) -> Vec<&str> {
        self.constraints.iter().map(|c| c.text.as_str()).collect()
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
mod tests;
