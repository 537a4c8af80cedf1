//! Unit tests of the ladder's record: transient retries and their backoff, a new strategy's
//! fresh local rungs, constraints from any source, what a failed milestone blocks.

use super::*;
use crate::domain::plan::fingerprint::Fingerprint;
use crate::domain::plan::{MilestoneStatus, Plan};
use crate::domain::repair::{Constraint, ConstraintSource};
use RepairLevel::*;

fn fp(name: &str) -> Fingerprint {
    Fingerprint(name.into())
}

fn attempt(level: RepairLevel, reason: ReplanReason) -> RepairDecision {
    RepairDecision::Attempt { level, reason }
}

#[test]
fn a_transient_fault_is_retried_unchanged_with_backoff_then_the_tool_is_unavailable() {
    let limits = RepairLimits::default();
    let mut h = RepairHistory::default();
    let call = "m1.s1@g1";
    assert_eq!(
        h.decide("m1", Fault::transient(call), &limits),
        RepairDecision::RetrySame {
            retry: 1,
            backoff_ms: 200
        }
    );
    assert_eq!(h.retrying("m1", call), 1);
    assert_eq!(
        h.decide("m1", Fault::transient(call), &limits),
        RepairDecision::RetrySame {
            retry: 2,
            backoff_ms: 400
        }
    );
    assert_eq!(h.retrying("m1", call), 2);
    // Unchanged retries are not thrash: L1 proposals stay open and uncounted.
    assert_eq!(h.attempts("m1", RetryStep), 0);
    assert!(h.milestones["m1"].exhausted.is_empty());
    assert!(h.milestones["m1"].failed.is_empty());
    // Spent: the tool stays unreachable, which needs other steps (L2).
    assert_eq!(
        h.decide("m1", Fault::transient(call), &limits),
        attempt(ReplanMilestone, ReplanReason::ToolUnavailable)
    );
    // Another call (a later step, or the same step in a new list) has its own retries.
    assert!(matches!(
        h.decide("m1", Fault::transient("m1.s2@g1"), &limits),
        RepairDecision::RetrySame { retry: 1, .. }
    ));
    // Zero retries configured: straight to tool_unavailable.
    let none = RepairLimits {
        transient_retries: 0,
        ..limits
    };
    assert_eq!(
        h.decide("m9", Fault::transient("x"), &none),
        attempt(ReplanMilestone, ReplanReason::ToolUnavailable)
    );
}

#[test]
fn backoff_doubles_and_saturates() {
    let limits = RepairLimits::default();
    assert_eq!(
        (1..=4).map(|r| limits.backoff_ms(r)).collect::<Vec<_>>(),
        [200, 400, 800, 1600]
    );
    let huge = RepairLimits {
        transient_backoff_ms: u64::MAX / 2,
        ..limits
    };
    assert_eq!(huge.backoff_ms(40), u64::MAX);
}

#[test]
fn constraints_from_any_source_are_new_once() {
    let mut h = RepairHistory::default();
    let tool = Constraint {
        text: "Amounts in  EUR".into(),
        source: ConstraintSource::Tool {
            milestone: "m1".into(),
            step: "s1".into(),
            tool: "query".into(),
        },
    };
    assert!(h.raise(tool));
    // The same constraint from a person, spelled differently, is already known.
    let person = |text: &str| Constraint {
        text: text.into(),
        source: ConstraintSource::Person {
            author: "ops".into(),
        },
    };
    assert!(!h.raise(person(" amounts in eur ")));
    assert!(!h.raise(person("   ")));
    assert!(h.raise(person("no writes before 18:00")));
    assert_eq!(h.constraints.len(), 2);
}

#[test]
fn a_failed_milestone_blocks_its_dependents_transitively() {
    let plan = Plan::from_value(
        &serde_json::json!({"milestones": [
            {"id": "m1", "title": "a", "effort": 1, "tools": ["t"], "accept": {"type": "artifact", "name": "x"}},
            {"id": "m2", "title": "b", "depends_on": ["m1"], "effort": 1, "tools": ["t"], "accept": {"type": "artifact", "name": "x"}},
            {"id": "m3", "title": "c", "depends_on": ["m2"], "effort": 1, "tools": ["t"], "accept": {"type": "artifact", "name": "x"}},
            {"id": "m4", "title": "d", "effort": 1, "tools": ["t"], "accept": {"type": "artifact", "name": "x"}}]}),
        10,
    )
    .unwrap();
    assert_eq!(blocked_by(&plan, "m1"), ["m2", "m3"]);
    assert_eq!(blocked_by(&plan, "m3"), Vec::<String>::new());
    let mut done = plan.clone();
    done.milestones[2].status = MilestoneStatus::Done;
    assert_eq!(blocked_by(&done, "m1"), ["m2"]);
}

#[test]
fn a_new_strategy_gets_fresh_local_rungs_but_remembers_what_failed() {
    let limits = RepairLimits::default();
    let mut h = RepairHistory::default();
    h.failed("m1", [fp("a")]);
    assert_eq!(
        h.propose("m1", RetryStep, fp("a"), &limits),
        ProposalVerdict::Escalate {
            to: ReplanMilestone
        }
    );
    h.propose("m1", ReplanMilestone, fp("b"), &limits);
    h.propose("m1", ReplanMilestone, fp("c"), &limits);
    assert_eq!(
        h.decide("m1", ReplanReason::CheckFailed, &limits),
        attempt(ReplanStrategy, ReplanReason::CheckFailed)
    );
    h.begin_replan_strategy(Some(fp("plan-v1")));
    // The new plan's m1 may retry and re-plan again; its old failed list still escalates.
    assert_eq!(
        h.decide("m1", ReplanReason::CheckFailed, &limits),
        attempt(RetryStep, ReplanReason::CheckFailed)
    );
    assert_eq!(
        h.propose("m1", RetryStep, fp("a"), &limits),
        ProposalVerdict::Escalate {
            to: ReplanMilestone
        }
    );
    // L3 is spent for the task: after L1/L2 the milestone gives up.
    h.propose("m1", ReplanMilestone, fp("d"), &limits);
    h.propose("m1", ReplanMilestone, fp("e"), &limits);
    assert_eq!(
        h.decide("m1", ReplanReason::CheckFailed, &limits),
        RepairDecision::GiveUp {
            reason: ReplanReason::CheckFailed
        }
    );
}

#[test]
fn the_plan_an_l3_replaces_is_the_one_installed() {
    let mut h = RepairHistory::default();
    h.plan_installed(fp("v1-as-installed"));
    let replaced = h.installed_plan.clone();
    h.begin_replan_strategy(replaced);
    assert_eq!(
        h.propose_plan(&fp("v1-as-installed")),
        ProposalVerdict::GiveUp
    );
    // The same milestones after more of them passed fingerprint differently: not a repeat.
    assert_eq!(
        h.propose_plan(&fp("v1-with-progress")),
        ProposalVerdict::Accept
    );
}
