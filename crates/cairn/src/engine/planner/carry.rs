//! What an L3 plan version carries over from the version it replaces, beyond the passed
//! milestones ([`crate::domain::plan::validate::carry_over`] keeps those, with their steps and
//! artifacts): the progress of a sibling milestone that was still running when the strategy
//! was re-planned.
//!
//! An L3 request stops the other runners at their next durable point (a committed step, a
//! committed tactical answer); it does not throw their work away. A milestone that was active
//! and that the new version keeps unchanged (same id, title, acceptance check, tools and
//! dependencies) keeps its step list, finished steps marked done, and its execution record,
//! and goes on from its next step. The milestone whose failure asked for the new strategy is
//! not carried: the new strategy re-plans it. Whatever is re-planned, a side-effecting call
//! identical to one already performed is answered from its receipt, never sent again (see
//! [`crate::tools::key`]).

use std::collections::BTreeSet;

use crate::domain::plan::{Milestone, MilestoneStatus, Plan, StepStatus};

/// Marks the in-flight milestones of `old` that `new` keeps unchanged as active again, with
/// their step lists. Returns their ids (their execution records are to be kept as they are).
/// `replanned` are the milestones whose failure asked for a new strategy: the new strategy
/// re-plans them, they are not carried.
pub fn in_flight(
    old: &Plan,
    new: &mut Plan,
    replanned: &BTreeSet<String>,
    unfinished: Unfinished,
) -> BTreeSet<String> {
    let mut carried = BTreeSet::new();
    for milestone in &mut new.milestones {
        if milestone.status == MilestoneStatus::Done || replanned.contains(&milestone.id) {
            continue;
        }
        let Some(before) = old.milestone(&milestone.id) else {
            continue;
        };
        if before.status != MilestoneStatus::Active
            || before.steps.is_empty()
            || !unchanged(before, milestone)
        {
            continue;
        }
        let steps: Vec<_> = match unfinished {
            Unfinished::Keep => before.steps.clone(),
            Unfinished::Rewrite => before
                .steps
                .iter()
                .filter(|s| s.status == StepStatus::Done)
                .cloned()
                .collect(),
        };
        if steps.is_empty() {
            continue;
        }
        milestone.status = MilestoneStatus::Active;
        milestone.steps = steps;
        carried.insert(milestone.id.clone());
    }
    carried
}

/// What becomes of a carried milestone's steps not run yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfinished {
    /// They run as written (the replan was about another milestone's failure).
    Keep,
    /// They are dropped and written again after the finished ones: the replan is for a
    /// constraint they were written without (measured live on the 1.5B model: a step list
    /// written just before a person's "no note to B's owner" was carried and wrote that note).
    Rewrite,
}

/// Whether the new version asks the same of a milestone: its steps still serve it.
fn unchanged(before: &Milestone, after: &Milestone) -> bool {
    let deps = |m: &Milestone| m.depends_on.iter().cloned().collect::<BTreeSet<_>>();
    before.title == after.title
        && before.accept == after.accept
        && before.tools == after.tools
        && deps(before) == deps(after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan(value: serde_json::Value) -> Plan {
        serde_json::from_value(value).expect("plan")
    }

    fn milestone(
        id: &str,
        title: &str,
        status: &str,
        steps: serde_json::Value,
    ) -> serde_json::Value {
        json!({"id": id, "title": title, "effort": 1, "tools": ["edit_file"], "status": status,
               "accept": {"type": "artifact", "name": "x", "non_empty": true}, "steps": steps})
    }

    fn steps() -> serde_json::Value {
        json!([
            {"id": "s1", "tool": "edit_file", "args": {"path": "a"}, "status": "done"},
            {"id": "s2", "tool": "edit_file", "args": {"path": "b"}, "status": "pending"}
        ])
    }

    #[test]
    fn an_unchanged_running_sibling_keeps_its_finished_steps() {
        let old = plan(json!({"milestones": [
            milestone("m1", "Deploy", "active", json!([])),
            milestone("m2", "Patch B", "active", steps()),
        ]}));
        let mut new = plan(json!({"milestones": [
            milestone("m3", "Deploy another way", "pending", json!([])),
            milestone("m2", "Patch B", "pending", json!([])),
        ]}));
        let carried = in_flight(
            &old,
            &mut new,
            &BTreeSet::from(["m1".to_string()]),
            Unfinished::Keep,
        );
        assert_eq!(carried, BTreeSet::from(["m2".to_string()]));
        let m2 = new.milestone("m2").expect("m2");
        assert_eq!(m2.status, MilestoneStatus::Active);
        assert_eq!(m2.steps.len(), 2);
        assert_eq!(m2.steps[0].status, StepStatus::Done);
        assert_eq!(
            new.milestone("m3").expect("m3").status,
            MilestoneStatus::Pending
        );
    }

    #[test]
    fn a_changed_or_replanned_milestone_is_not_carried() {
        let old = plan(json!({"milestones": [
            milestone("m1", "Deploy", "active", steps()),
            milestone("m2", "Patch B", "active", steps()),
            milestone("m4", "Patch D", "pending", json!([])),
        ]}));
        let mut new = plan(json!({"milestones": [
            milestone("m1", "Deploy", "pending", json!([])),
            milestone("m2", "Patch B and C", "pending", json!([])),
            milestone("m4", "Patch D", "pending", json!([])),
        ]}));
        let replanned = BTreeSet::from(["m1".to_string()]);
        assert!(in_flight(&old, &mut new, &replanned, Unfinished::Keep).is_empty());
        assert!(
            new.milestones
                .iter()
                .all(|m| m.status == MilestoneStatus::Pending)
        );
        assert!(new.milestones.iter().all(|m| m.steps.is_empty()));
    }

    #[test]
    fn under_a_new_constraint_only_the_finished_steps_are_carried() {
        let old = plan(json!({"milestones": [
            milestone("m2", "Patch B", "active", steps()),
            milestone("m3", "Patch C", "active", json!([
                {"id": "s1", "tool": "edit_file", "args": {"path": "c"}, "status": "pending"}
            ])),
        ]}));
        let mut new = plan(json!({"milestones": [
            milestone("m2", "Patch B", "pending", json!([])),
            milestone("m3", "Patch C", "pending", json!([])),
        ]}));
        let carried = in_flight(&old, &mut new, &BTreeSet::new(), Unfinished::Rewrite);
        assert_eq!(carried, BTreeSet::from(["m2".to_string()]));
        let m2 = new.milestone("m2").expect("m2");
        assert_eq!(m2.steps.len(), 1, "the pending step is written again");
        assert_eq!(m2.steps[0].status, StepStatus::Done);
        let m3 = new.milestone("m3").expect("m3");
        assert_eq!((m3.status, m3.steps.len()), (MilestoneStatus::Pending, 0));
    }
}
