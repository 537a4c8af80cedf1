//! Wall time when milestones run one at a time, through the HTTP API on `wall_lending.json`:
//! a slow model answer spends more than its milestone's share and the reserve together, and the
//! waiting milestone lends what it holds (one `return`, then the reserve's `grant`), so the task
//! ends as its work does, not `budget_exhausted` with a sibling's time unspent. Run in parallel,
//! nothing is lent: the slow answer is cut off where m1's share and the reserve end (a call's
//! time limit is the wall time its milestone has left), the books never hold more than they
//! cover, and the task ends `budget_exhausted`.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod engine_stack;

use cairn::domain::settings::EngineSettings;
use engine_stack::Stack;
use serde_json::{Value, json};

const GOAL: &str = "Find the first record, then the second";

async fn run(stack: &Stack) -> (Value, Value) {
    let (status, task) = stack
        .post_task(&json!({"goal": GOAL, "strategy": "v2",
            "budget": {"tokens": 100_000, "tool_calls": 20, "wall_ms": 5_000}}))
        .await;
    assert_eq!(status, 202, "{task}");
    let id = task["id"].as_str().expect("id").to_string();
    let task = stack.finished(&id).await;
    let (_, ledger) = stack.get(&format!("/v1/tasks/{id}/ledger")).await;
    (task, ledger)
}

fn wall_entries<'a>(ledger: &'a Value, kind: &str) -> Vec<&'a Value> {
    ledger["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["unit"] == "wall_ms" && e["kind"] == kind)
        .collect()
}

#[tokio::test]
async fn one_at_a_time_a_waiting_milestone_lends_its_wall_time() {
    let settings = EngineSettings {
        max_parallel: 1,
        ..EngineSettings::default()
    };
    let stack = Stack::start_with("wall_lending.json", settings).await;
    let (task, ledger) = run(&stack).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    // m2 returned wall time while it waited (before any of its own spend), and m1 was granted it.
    let returned = wall_entries(&ledger, "return");
    let lent = returned
        .iter()
        .find(|e| e["milestone_id"] == "m2")
        .expect("m2 lent wall time");
    let first_m2_charge = wall_entries(&ledger, "charge")
        .into_iter()
        .find(|e| e["milestone_id"] == "m2")
        .expect("m2 ran");
    assert!(
        lent["id"].as_i64() < first_m2_charge["id"].as_i64(),
        "{ledger:#}"
    );
    assert!(
        wall_entries(&ledger, "grant")
            .iter()
            .any(|e| e["milestone_id"] == "m1"),
        "{ledger:#}"
    );
    let wall = &ledger["units"]["wall_ms"];
    let allocated: i64 = ["m1", "m2"]
        .iter()
        .map(|m| wall["milestones"][m]["allocated"].as_i64().unwrap_or(0))
        .sum();
    assert!(
        allocated + wall["reserve"].as_i64().unwrap_or(0) <= 5_000,
        "{wall:#}"
    );
    stack.stop().await;
}

#[tokio::test]
async fn in_parallel_nothing_is_lent_and_the_slow_milestone_exhausts_the_task() {
    let stack = Stack::start("wall_lending.json").await;
    let (task, ledger) = run(&stack).await;
    assert_eq!(task["status"], "budget_exhausted", "{task:#}");
    assert!(
        wall_entries(&ledger, "return")
            .iter()
            .all(|e| e["milestone_id"] != "m2")
    );
    // Cut off where m1's share and the reserve end (3.5 s asked of about 2.9 s): its charges
    // never exceed what it was given, its share and the reserve's grant.
    let wall = &ledger["units"]["wall_ms"];
    let m1_charged: i64 = wall_entries(&ledger, "charge")
        .iter()
        .filter(|e| e["milestone_id"] == "m1")
        .map(|e| e["amount"].as_i64().unwrap())
        .sum();
    let given = wall["milestones"]["m1"]["allocated"].as_i64().unwrap();
    assert!(m1_charged <= given, "{m1_charged} of {given}: {wall:#}");
    assert!(
        m1_charged + 200 >= given,
        "the answer ran to its limit: {wall:#}"
    );
    assert_eq!(wall["reserve"], 0, "the reserve went to m1: {wall:#}");
    assert!(task["result"]["spend"]["wall_ms"].as_i64().unwrap() <= 5_000);
    stack.stop().await;
}
