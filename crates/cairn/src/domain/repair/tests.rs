//! Unit tests of the repair ladder: failure classes pick the rung, transient faults retry
//! unchanged within their bound, fingerprints of failed proposals escalate at every level, and
//! replan triggers (dependency failed, new constraint) are data.

use super::*;
use crate::domain::plan::fingerprint::Fingerprint;
use RepairLevel::*;

fn fp(name: &str) -> Fingerprint {
    Fingerprint(name.into())
}

fn attempt(level: RepairLevel, reason: ReplanReason) -> RepairDecision {
    RepairDecision::Attempt { level, reason }
}

#[test]
fn the_seed_path_tries_l1_before_l2() {
    let limits = RepairLimits::default();
    let mut h = RepairHistory::default();
    h.failed("m4", [fp("initial")]);
    // Check fails: retry the step with the error in context (twice at most), then L2.
    for (i, proposal) in ["retry-1", "retry-2"].into_iter().enumerate() {
        assert_eq!(
            h.decide("m4", ReplanReason::CheckFailed, &limits),
            attempt(RetryStep, ReplanReason::CheckFailed),
            "retry {i}"
        );
        assert_eq!(
            h.propose("m4", RetryStep, fp(proposal), &limits),
            ProposalVerdict::Accept
        );
        h.failed("m4", [fp(proposal)]);
    }
    assert_eq!(h.attempts("m4", RetryStep), 2);
    assert_eq!(
        h.decide("m4", ReplanReason::CheckFailed, &limits),
        attempt(ReplanMilestone, ReplanReason::CheckFailed)
    );
    assert_eq!(
        h.propose("m4", ReplanMilestone, fp("patch-script-too"), &limits),
        ProposalVerdict::Accept
    );
    assert_eq!(h.attempts("m4", ReplanMilestone), 1);
    // Other milestones are unaffected.
    assert_eq!(
        h.decide("m2", ReplanReason::CheckFailed, &limits),
        attempt(RetryStep, ReplanReason::CheckFailed)
    );
}

#[test]
fn the_full_ladder_ends_in_giving_up() {
    let limits = RepairLimits::default();
    let mut h = RepairHistory::default();
    let reason = ReplanReason::UnexpectedObservation;
    let mut levels = Vec::new();
    for i in 0..10 {
        match h.decide("m1", reason, &limits) {
            RepairDecision::Attempt { level, .. } => {
                levels.push(level);
                if level == ReplanStrategy {
                    h.begin_replan_strategy(Some(fp("plan")));
                    continue;
                }
                assert_eq!(
                    h.propose("m1", level, fp(&format!("p{i}")), &limits),
                    ProposalVerdict::Accept
                );
            }
            RepairDecision::GiveUp { reason: r } => {
                assert_eq!(r, reason);
                break;
            }
            RepairDecision::RetrySame { .. } => panic!("a wrong result is never retried unchanged"),
        }
    }
    // The new strategy gets fresh local rungs (L3 is spent for the task), then gives up.
    assert_eq!(
        levels,
        vec![
            RetryStep,
            RetryStep,
            ReplanMilestone,
            ReplanMilestone,
            ReplanStrategy,
            RetryStep,
            RetryStep,
            ReplanMilestone,
            ReplanMilestone
        ]
    );
}

#[test]
fn a_retry_that_repeats_a_failed_proposal_escalates_at_once() {
    let limits = RepairLimits::default();
    let mut h = RepairHistory::default();
    h.failed("m1", [fp("list")]);
    // The same steps after a wrong result: thrash, so L1 closes although attempts are left.
    assert_eq!(
        h.propose("m1", RetryStep, fp("list"), &limits),
        ProposalVerdict::Escalate {
            to: ReplanMilestone
        }
    );
    assert_eq!(h.attempts("m1", RetryStep), 0);
    assert_eq!(
        h.decide("m1", ReplanReason::CheckFailed, &limits),
        attempt(ReplanMilestone, ReplanReason::CheckFailed)
    );
}

#[test]
fn a_replan_oscillating_between_failed_lists_escalates() {
    let limits = RepairLimits::default();
    let mut h = RepairHistory::default();
    h.failed("m2", [fp("a")]);
    assert_eq!(
        h.propose("m2", ReplanMilestone, fp("b"), &limits),
        ProposalVerdict::Accept
    );
    h.failed("m2", [fp("b")]);
    // Back to the first failed list: escalate past L2 to L3.
    assert_eq!(
        h.propose("m2", ReplanMilestone, fp("a"), &limits),
        ProposalVerdict::Escalate { to: ReplanStrategy }
    );
    assert_eq!(h.attempts("m2", ReplanMilestone), 1);
    // A list executed but not failed (it passed, or failed only transiently) is no repeat.
    assert_eq!(
        h.propose("m3", ReplanMilestone, fp("a"), &limits),
        ProposalVerdict::Accept
    );
    // L1 used up and L2 closed: straight to L3.
    h.propose("m2", RetryStep, fp("r1"), &limits);
    h.propose("m2", RetryStep, fp("r2"), &limits);
    assert_eq!(
        h.decide("m2", ReplanReason::CheckFailed, &limits),
        attempt(ReplanStrategy, ReplanReason::CheckFailed)
    );
}

#[test]
fn a_strategy_identical_to_a_failed_one_gives_up() {
    let limits = RepairLimits::default();
    let mut h = RepairHistory::default();
    assert_eq!(
        h.decide("m3", ReplanReason::DependencyFailed, &limits),
        attempt(ReplanStrategy, ReplanReason::DependencyFailed)
    );
    h.begin_replan_strategy(Some(fp("plan-v1")));
    assert_eq!(h.replan_strategy, 1);
    assert_eq!(h.propose_plan(&fp("plan-v1")), ProposalVerdict::GiveUp);
    assert_eq!(
        h.propose("m3", ReplanStrategy, fp("plan-v1"), &limits),
        ProposalVerdict::GiveUp
    );
    assert_eq!(h.propose_plan(&fp("plan-v2")), ProposalVerdict::Accept);
    // An L3 for a new constraint records no failed plan.
    h.begin_replan_strategy(None);
    assert_eq!(h.failed_plans.len(), 1);
}

#[test]
fn strategy_replans_are_counted_per_task() {
    let limits = RepairLimits::default();
    let mut h = RepairHistory::default();
    h.begin_replan_strategy(Some(fp("v1")));
    assert_eq!(
        h.decide("m3", ReplanReason::NewConstraint, &limits),
        RepairDecision::GiveUp {
            reason: ReplanReason::NewConstraint
        }
    );
    assert_eq!(
        h.decide("m3", ReplanReason::PlanExhaustedButGoalUnmet, &limits),
        RepairDecision::GiveUp {
            reason: ReplanReason::PlanExhaustedButGoalUnmet
        }
    );
    // m3 can still repair locally.
    assert_eq!(
        h.decide("m3", ReplanReason::CheckFailed, &limits),
        attempt(RetryStep, ReplanReason::CheckFailed)
    );
}

#[test]
fn classes_and_reasons_start_at_their_lowest_useful_level() {
    let limits = RepairLimits::default();
    let h = RepairHistory::default();
    let level = |f: Fault| match h.decide("m", f, &limits) {
        RepairDecision::Attempt { level, .. } => level,
        other => panic!("fresh history: {other:?}"),
    };
    assert_eq!(level(ReplanReason::UnexpectedObservation.into()), RetryStep);
    assert_eq!(level(ReplanReason::CheckFailed.into()), RetryStep);
    assert_eq!(level(ReplanReason::ToolUnavailable.into()), ReplanMilestone);
    assert_eq!(level(ReplanReason::BudgetPressure.into()), ReplanMilestone);
    assert_eq!(level(ReplanReason::DependencyFailed.into()), ReplanStrategy);
    assert_eq!(level(ReplanReason::NewConstraint.into()), ReplanStrategy);
    assert_eq!(
        level(ReplanReason::PlanExhaustedButGoalUnmet.into()),
        ReplanStrategy
    );
    // The class can raise the rung: an impossible check failure goes to L3.
    let impossible = Fault {
        class: FailureClass::Impossible,
        reason: ReplanReason::CheckFailed,
        call: None,
    };
    assert_eq!(level(impossible), ReplanStrategy);
    for reason in ReplanReason::ALL {
        assert_ne!(reason.class(), FailureClass::Transient, "{reason:?}");
        let fault = Fault::from(reason);
        assert!(fault.lowest_level() >= reason.class().lowest_level());
    }
    assert_eq!(FailureClass::Transient.lowest_level(), RetryStep);
    assert_eq!(FailureClass::WrongResult.lowest_level(), RetryStep);
}

#[test]
fn zero_limits_and_over_limit_proposals() {
    let none = RepairLimits {
        retry_step: 0,
        replan_milestone: 0,
        replan_strategy: 0,
        ..RepairLimits::default()
    };
    let mut h = RepairHistory::default();
    assert_eq!(
        h.decide("m", ReplanReason::CheckFailed, &none),
        RepairDecision::GiveUp {
            reason: ReplanReason::CheckFailed
        }
    );
    // A proposal at a used-up level is not counted; the next open level is named.
    let l1_only_spent = RepairLimits {
        retry_step: 0,
        ..RepairLimits::default()
    };
    assert_eq!(
        h.propose("m", RetryStep, fp("x"), &l1_only_spent),
        ProposalVerdict::Escalate {
            to: ReplanMilestone
        }
    );
    assert_eq!(h.attempts("m", RetryStep), 0);
    assert_eq!(
        h.propose("m", RetryStep, fp("x"), &none),
        ProposalVerdict::GiveUp
    );
}

#[test]
fn names_and_serde_round_trip() {
    for r in ReplanReason::ALL {
        assert_eq!(ReplanReason::parse(r.as_str()), Some(r));
        assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
    }
    for l in RepairLevel::ALL {
        assert_eq!(serde_json::to_value(l).unwrap(), l.as_str());
    }
    for c in FailureClass::ALL {
        assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
    }
    let mut h = RepairHistory::default();
    h.failed("m1", [fp("a")]);
    h.retrying("m1", "s1@g0");
    h.propose("m1", RetryStep, fp("a"), &RepairLimits::default());
    h.begin_replan_strategy(Some(fp("p")));
    let back: RepairHistory = serde_json::from_value(serde_json::to_value(&h).unwrap()).unwrap();
    assert_eq!(back, h);
    // A checkpoint written before transient retries and failed fingerprints still reads.
    let old: RepairHistory = serde_json::from_value(serde_json::json!({
        "milestones": {"m1": {"retry_step": 1, "replan_milestone": 0, "exhausted": [],
                              "retried": ["x"], "executed": ["x"]}},
        "replan_strategy": 0, "plans": ["y"]}))
    .unwrap();
    assert_eq!(old.attempts("m1", RetryStep), 1);
    assert_eq!(
        serde_json::to_value(attempt(RetryStep, ReplanReason::CheckFailed)).unwrap(),
        serde_json::json!({"action": "attempt", "level": "retry_step", "reason": "check_failed"})
    );
}

#[test]
fn rung_names_include_giving_up() {
    for l in RepairLevel::ALL {
        assert_eq!(RepairLevel::parse(l.as_str()), Some(l));
        assert_eq!(rung_name(Some(l)), l.as_str());
        assert_eq!(parse_rung(l.as_str()), Some(Some(l)));
    }
    assert_eq!(rung_name(None), "give_up");
    assert_eq!(parse_rung("give_up"), Some(None));
    assert_eq!(parse_rung("retry"), None);
    assert_eq!(RepairLevel::parse("give_up"), None);
}
