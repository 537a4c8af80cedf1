//! The L3 replan gate: a new plan version must keep every finished milestone of the old one.

use std::collections::BTreeMap;

use crate::domain::plan::error::{PlanError, short};
use crate::domain::plan::{Milestone, MilestoneStatus, Plan};

/// Accepts an L3 replan only if it keeps every finished milestone of `old` (same id, title and
/// check, no dependency on unfinished work), and returns the plan to store: finished milestones
/// carried over as done with their steps (their artifacts stay attached by id), every other
/// milestone pending with no steps, whatever statuses the planner wrote.
pub fn carry_over(old: &Plan, new: &Plan) -> Result<Plan, Vec<PlanError>> {
    let mut errors = Vec::new();
    let done: BTreeMap<&str, &Milestone> = old
        .milestones
        .iter()
        .filter(|m| m.status == MilestoneStatus::Done)
        .map(|m| (m.id.as_str(), m))
        .collect();
    for (id, kept) in &done {
        match new.milestone(id) {
            None => errors.push(PlanError::DroppedDoneMilestone {
                milestone: short(id),
            }),
            Some(m) => {
                if m.title != kept.title {
                    errors.push(PlanError::RewroteDoneMilestone {
                        milestone: short(id),
                        field: "title",
                    });
                }
                if m.accept != kept.accept {
                    errors.push(PlanError::RewroteDoneMilestone {
                        milestone: short(id),
                        field: "accept",
                    });
                }
                for dep in m
                    .depends_on
                    .iter()
                    .filter(|d| !done.contains_key(d.as_str()))
                {
                    errors.push(PlanError::DoneDependsOnUnfinished {
                        milestone: short(id),
                        dependency: short(dep),
                    });
                }
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut merged = new.clone();
    for m in &mut merged.milestones {
        match done.get(m.id.as_str()) {
            Some(kept) => {
                m.status = MilestoneStatus::Done;
                m.steps = kept.steps.clone();
            }
            None => {
                m.status = MilestoneStatus::Pending;
                m.steps.clear();
            }
        }
    }
    Ok(merged)
}
