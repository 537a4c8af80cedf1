//! Side effects at most once by content, and an L3 that keeps a running sibling's finished
//! steps, through the HTTP API against the simulator (`scenarios/l3_sibling_in_flight.json`).
//!
//! m1 and m2 run in parallel; m1's deploy tool is gone (410), which makes the plan stale and
//! asks for a new strategy while m2 has finished one edit and has the next one in flight. The
//! new plan version must show m2's finished steps done, m2 must go on from where it stopped
//! (no new step list, no step run twice), and every side-effecting action, including m1's
//! patch that the new strategy's m3 repeats, must reach its tool once.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod engine_stack;

use engine_stack::Stack;
use serde_json::Value;

const GOAL: &str = "Rename db.url to db.dsn in services A and B, and deploy service A";

fn of_kind<'a>(events: &'a [Value], kind: &str, milestone: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["kind"] == kind && e["data"]["milestone"] == milestone)
        .collect()
}

fn seq(event: &Value) -> i64 {
    event["seq"].as_i64().unwrap_or_default()
}

/// The `step.finished` event of `step`; exactly one, or the step ran twice (or never).
fn finished_once<'a>(events: &'a [Value], milestone: &str, step: &str) -> &'a Value {
    let found: Vec<&Value> = of_kind(events, "step.finished", milestone)
        .into_iter()
        .filter(|e| e["data"]["step"] == step)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{milestone}/{step} finished once: {found:#?}"
    );
    found[0]
}

#[tokio::test]
async fn an_l3_keeps_a_running_siblings_finished_steps_on_sqlite() {
    l3_with_a_sibling_in_flight(Stack::start("l3_sibling_in_flight.json").await).await;
}

#[tokio::test]
async fn an_l3_keeps_a_running_siblings_finished_steps_on_postgres() {
    l3_with_a_sibling_in_flight(Stack::start_pg("l3_sibling_in_flight.json").await).await;
}

async fn l3_with_a_sibling_in_flight(stack: Stack) {
    let id = stack.submit(GOAL, "auto", 100_000).await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let events = stack.events(&id).await;

    // m1's tool is gone: the plan is stale and the strategy is re-planned.
    assert_eq!(of_kind(&events, "plan.stale", "m1").len(), 1);
    let l3 = of_kind(&events, "repair.started", "m1")
        .into_iter()
        .find(|e| e["data"]["level"] == "replan_strategy")
        .map(seq)
        .expect("m1 asked for a new strategy");
    // At that moment m2 had finished a step and was still running.
    let m2_s1 = seq(finished_once(&events, "m2", "m2.s1"));
    let m2_s2 = seq(finished_once(&events, "m2", "m2.s2"));
    let m2_s3 = seq(finished_once(&events, "m2", "m2.s3"));
    assert!(m2_s1 < l3, "m2 had a finished step when the L3 began");
    let m2_passed = of_kind(&events, "monitor.decided", "m2")
        .into_iter()
        .find(|e| e["data"]["decision"] == "passed")
        .map(seq)
        .expect("m2 passed");
    assert!(l3 < m2_passed, "m2 was still running when the L3 began");
    let replanned = events
        .iter()
        .find(|e| e["kind"] == "plan.accepted" && e["data"]["reason"] == "replan_strategy")
        .map(seq)
        .expect("a new strategy was accepted");
    assert!(
        m2_s2 < replanned && replanned < m2_s3,
        "m2 stopped at a durable point"
    );
    for e in of_kind(&events, "step.finished", "m2") {
        assert_eq!(e["data"]["ok"], true, "{e:#}");
    }
    // m2 went on with its own step list: no second tactical call for it.
    let tactical_m2 = stack
        .sim
        .stats()
        .llm
        .requests
        .iter()
        .filter(|r| {
            r.purpose.as_deref() == Some("tactical") && r.milestone.as_deref() == Some("m2")
        })
        .count();
    assert_eq!(tactical_m2, 1, "m2's step list was not re-planned");

    // The L3 plan version shows m2's finished steps done (and what is left pending).
    let (status, plans) = stack.get(&format!("/v1/tasks/{id}/plans")).await;
    assert_eq!(status, 200, "{plans}");
    let version = plans["items"]
        .as_array()
        .expect("versions")
        .iter()
        .find(|v| v["reason"] == "replan_strategy")
        .expect("an L3 plan version");
    let plan = &version["plan"];
    let milestone = |id: &str| {
        plan["milestones"]
            .as_array()
            .and_then(|ms| ms.iter().find(|m| m["id"] == id))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let m2 = milestone("m2");
    assert_eq!(m2["status"], "active", "{plan:#}");
    let statuses: Vec<(&str, &str)> = m2["steps"]
        .as_array()
        .expect("m2 keeps its steps")
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap_or_default(),
                s["status"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [("m2.s1", "done"), ("m2.s2", "done"), ("m2.s3", "pending")],
        "{plan:#}"
    );
    assert_eq!(milestone("m1"), Value::Null, "the new strategy dropped m1");
    // The passed milestone is kept, with its steps, and its artifact still serves the rest.
    let m0 = milestone("m0");
    assert_eq!(m0["status"], "done", "{plan:#}");
    assert_eq!(m0["steps"][0]["status"], "done", "{plan:#}");
    assert_eq!(
        of_kind(&events, "milestone.started", "m0").len(),
        1,
        "m0 ran once"
    );
    assert_eq!(
        version["plan"]["artifacts"]["m0"],
        serde_json::json!(["usage_list"]),
        "{version:#}"
    );
    assert_eq!(milestone("m3")["status"], "pending");

    // Every side-effecting action reached its tool once: m2's three edits, and a/config.py,
    // which m1 patched and m3 (the new strategy) patches again: answered from its receipt.
    let stats = stack.sim.stats();
    let edits = &stats.tools["edit_file"];
    assert_eq!(edits.calls, 4, "{edits:?}");
    assert_eq!(edits.distinct_args, 4, "{edits:?}");
    assert_eq!(edits.max_calls_per_args, 1, "{edits:?}");
    assert_eq!(edits.distinct_keys, 4, "{edits:?}");
    assert_eq!(stats.tools["deploy"].calls, 1);
    assert_eq!(stats.tools["search"].calls, 1, "m0 was not redone");
    assert_eq!(
        stats.tools["deploy_legacy"].calls, 1,
        "a gone tool is not retried"
    );
    let m3_patch = finished_once(&events, "m3", "m3.s1");
    assert_eq!(m3_patch["data"]["ok"], true);
    assert_eq!(m3_patch["data"]["output"]["patched"], "a/config.py");
    stack.stop().await;
}
