//! Unit tests of the repair ladder: every path through decide and propose.

use super::*;
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
    h.record_steps("m4", fp("initial"));
    // Check fails: retry the step (twice at most), then re-plan the milestone.
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
                assert_eq!(
                    h.propose("m1", level, fp(&format!("p{i}")), &limits),
                    ProposalVerdict::Accept
                );
            }
            RepairDecision::GiveUp { reason: r } => {
                assert_eq!(r, reason);
                break;
            }
        }
    }
    assert_eq!(
        levels,
        vec![
            RetryStep,
            RetryStep,
            ReplanMilestone,
            ReplanMilestone,
            ReplanStrategy
        ]
    );
}

#[test]
fn an_identical_retry_is_allowed_once_then_escalates() {
    let limits = RepairLimits::default();
    let mut h = RepairHistory::default();
    h.record_steps("m1", fp("list"));
    // A timeout: the same step again is a fair retry.
    assert_eq!(
        h.propose("m1", RetryStep, fp("list"), &limits),
        ProposalVerdict::Accept
    );
    // The same again: escalate, and L1 is closed for this milestone although one attempt is left.
    assert_eq!(
        h.propose("m1", RetryStep, fp("list"), &limits),
        ProposalVerdict::Escalate {
            to: ReplanMilestone
        }
    );
    assert_eq!(h.attempts("m1", RetryStep), 1);
    assert_eq!(
        h.decide("m1", ReplanReason::CheckFailed, &limits),
        attempt(ReplanMilestone, ReplanReason::CheckFailed)
    );
}

#[test]
fn a_replan_that_repeats_executed_steps_escalates() {
    let limits = RepairLimits::default();
    let mut h = RepairHistory::default();
    h.record_steps("m2", fp("first"));
    assert_eq!(
        h.propose("m2", RetryStep, fp("retry"), &limits),
        ProposalVerdict::Accept
    );
    // L2 proposing the original list, or the retried one, is not new.
    assert_eq!(
        h.propose("m2", ReplanMilestone, fp("first"), &limits),
        ProposalVerdict::Escalate { to: ReplanStrategy }
    );
    assert_eq!(h.attempts("m2", ReplanMilestone), 0);
    assert_eq!(
        h.decide("m2", ReplanReason::CheckFailed, &limits),
        attempt(RetryStep, ReplanReason::CheckFailed)
    );
    assert_eq!(
        h.propose("m2", RetryStep, fp("retry-b"), &limits),
        ProposalVerdict::Accept
    );
    // L1 used up, L2 closed: straight to L3.
    assert_eq!(
        h.decide("m2", ReplanReason::CheckFailed, &limits),
        attempt(ReplanStrategy, ReplanReason::CheckFailed)
    );
}

#[test]
fn a_repeated_strategy_gives_up() {
    let limits = RepairLimits::default();
    let mut h = RepairHistory::default();
    h.record_plan(fp("plan-v1"));
    assert_eq!(
        h.decide("m3", ReplanReason::DependencyFailed, &limits),
        attempt(ReplanStrategy, ReplanReason::DependencyFailed)
    );
    assert_eq!(
        h.propose("m3", ReplanStrategy, fp("plan-v1"), &limits),
        ProposalVerdict::GiveUp
    );
    assert_eq!(h.replan_strategy, 0);
    assert_eq!(
        h.propose("m3", ReplanStrategy, fp("plan-v2"), &limits),
        ProposalVerdict::Accept
    );
    assert_eq!(h.replan_strategy, 1);
}

#[test]
fn strategy_replans_are_counted_per_task() {
    let limits = RepairLimits::default();
    let mut h = RepairHistory::default();
    assert_eq!(
        h.propose("m2", ReplanStrategy, fp("v2"), &limits),
        ProposalVerdict::Accept
    );
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
fn reasons_start_at_their_lowest_useful_level() {
    let limits = RepairLimits::default();
    let h = RepairHistory::default();
    let level = |r| match h.decide("m", r, &limits) {
        RepairDecision::Attempt { level, .. } => level,
        RepairDecision::GiveUp { .. } => panic!("fresh history gives up"),
    };
    assert_eq!(level(ReplanReason::UnexpectedObservation), RetryStep);
    assert_eq!(level(ReplanReason::CheckFailed), RetryStep);
    assert_eq!(level(ReplanReason::ToolUnavailable), ReplanMilestone);
    assert_eq!(level(ReplanReason::BudgetPressure), ReplanMilestone);
    assert_eq!(level(ReplanReason::DependencyFailed), ReplanStrategy);
    assert_eq!(level(ReplanReason::NewConstraint), ReplanStrategy);
    assert_eq!(
        level(ReplanReason::PlanExhaustedButGoalUnmet),
        ReplanStrategy
    );
}

#[test]
fn zero_limits_and_over_limit_proposals() {
    let none = RepairLimits {
        retry_step: 0,
        replan_milestone: 0,
        replan_strategy: 0,
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
    let mut h = RepairHistory::default();
    h.record_steps("m1", fp("a"));
    h.propose("m1", RetryStep, fp("a"), &RepairLimits::default());
    h.propose("m1", RetryStep, fp("a"), &RepairLimits::default());
    let back: RepairHistory = serde_json::from_value(serde_json::to_value(&h).unwrap()).unwrap();
    assert_eq!(back, h);
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
