//! The checkpoint's typed fields keep the JSON an earlier attempt wrote.

use serde_json::json;

use super::*;

#[test]
fn typed_milestone_fields_keep_their_json() {
    let run = MilestoneRun {
        pending_repair: Some(RepairLevel::ReplanMilestone),
        failure: Some(Failure {
            reason: ReplanReason::CheckFailed,
            detail: "no rows".into(),
            step: Some("s1".into()),
            executor: false,
            seq: Some(7),
        }),
        repairs: RepairLog {
            levels: vec![
                Some(RepairLevel::RetryStep),
                Some(RepairLevel::ReplanMilestone),
                None,
            ],
        },
        outcome: Some(MilestoneOutcome::OverBudget),
        ..MilestoneRun::default()
    };
    let value = serde_json::to_value(&run).unwrap();
    assert_eq!(value["pending_repair"], "replan_milestone");
    assert_eq!(value["failure"]["reason"], "check_failed");
    assert_eq!(
        value["repairs"],
        json!({"levels": ["retry_step", "replan_milestone", "give_up"]})
    );
    assert_eq!(value["outcome"], "over_budget");
    let back: MilestoneRun = serde_json::from_value(value).unwrap();
    assert_eq!(back, run);
}

#[test]
fn every_outcome_and_an_empty_run_read_back() {
    for (outcome, name) in [
        (MilestoneOutcome::Passed, "passed"),
        (MilestoneOutcome::Failed, "failed"),
        (MilestoneOutcome::OverBudget, "over_budget"),
    ] {
        assert_eq!(serde_json::to_value(outcome).unwrap(), name);
    }
    let value = serde_json::to_value(MilestoneRun::default()).unwrap();
    assert_eq!(value["pending_repair"], serde_json::Value::Null);
    assert_eq!(value["outcome"], serde_json::Value::Null);
    assert_eq!(value["repairs"], json!({"levels": []}));
    let refused = json!({"levels": ["retry_step", "climb"]});
    assert!(serde_json::from_value::<RepairLog>(refused).is_err());
}
