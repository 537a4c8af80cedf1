use super::*;
use crate::domain::gate::{GateThresholds, Route, route};

fn f(goal: &str) -> GateFeatures {
    heuristic_features(goal, &[])
}

#[test]
fn the_worked_example_is_planned() {
    let x = f("Rename config key db.url to db.dsn in services A, B, C");
    assert!(x.touches_writes);
    assert_eq!(x.targets, 3);
    assert_eq!(x.goal_kind, "change");
    assert_eq!(route(x, &GateThresholds::default()).route, Route::Plan);
}

#[test]
fn a_one_tool_question_goes_direct() {
    let x = f("What is the current version of the payments service?");
    assert!(!x.touches_writes, "{x:?}");
    assert_eq!(
        (x.targets, x.est_tool_calls, x.goal_kind.as_str()),
        (1, 1, "lookup")
    );
    assert_eq!(route(x, &GateThresholds::default()).route, Route::Direct);
}

#[test]
fn write_verbs_in_any_form_touch_writes() {
    for goal in [
        "Deploy the new build",
        "delete old logs",
        "Send the weekly report",
        "pay invoice 42",
        "the file was edited",
        "patching the config",
        "stopped containers need cleanup",
        "Email has been sent to Bob",
        "Updating the docs",
        "we paid twice",
    ] {
        assert!(f(goal).touches_writes, "{goal}");
    }
    for goal in [
        "What is the payload size?",
        "list the senders",
        "how much did we spend",
        "Editorial guidelines summary",
    ] {
        assert!(!f(goal).touches_writes, "{goal}");
    }
    assert!(heuristic_features("use wire_funds for the vendor", &["wire_funds"]).touches_writes);
}

#[test]
fn targets_are_counted_from_enumerations_and_quantities() {
    assert_eq!(f("Check services A, B and C").targets, 3);
    assert_eq!(f("check the files a.py and b/c.py for TODOs").targets, 2);
    assert_eq!(f("summarize 12 documents").targets, 12);
    assert_eq!(f("look at three repos").targets, 3);
    assert_eq!(f("check every service? no: all services").targets, 2);
    assert_eq!(
        f("Compare the weather in Paris, London and Rome").targets,
        3
    );
    assert_eq!(f("Check service A").targets, 1);
    assert_eq!(
        f("what is 2 and 2").targets,
        2,
        "numbers look like names: errs to plan"
    );
    assert_eq!(f("find the bug and explain it").targets, 1);
}

#[test]
fn tool_calls_scale_with_actions_and_targets() {
    assert_eq!(
        f("find the failing test, run it and summarize the error").est_tool_calls,
        3
    );
    assert_eq!(f("Check services A, B and C").est_tool_calls, 3);
    assert_eq!(
        f("fetch and compare files a.txt and b.txt").est_tool_calls,
        4
    );
}
