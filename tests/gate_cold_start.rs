//! The gate's cold start through the HTTP API, on the in-process simulator
//! (`gate_cold_start.json`): a read-only goal of few estimated calls goes direct while its kind
//! has no record, keeps going direct while the record holds, and is planned once the kind's
//! own direct record falls below `direct_min_success`; a change is planned whatever the record.
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
use serde_json::Value;

const QUESTION: &str = "What is the size of database db-main?";
const OTHER: &str = "What is the size of database db-old?";
const DESTRUCTIVE: &str = "Delete the production database db-main and drop all its tables";

/// The rules of the task's `gate.decided` event.
async fn rules(stack: &Stack, id: &str) -> Vec<String> {
    let decided = stack.events_of(id, "gate.decided").await;
    decided[0]["reasons"]
        .as_array()
        .expect("reasons")
        .iter()
        .filter_map(|r| r["rule"].as_str().map(str::to_string))
        .collect()
}

async fn has_rule(stack: &Stack, id: &str, rule: &str) -> bool {
    rules(stack, id).await.iter().any(|r| r == rule)
}

async fn run(stack: &Stack, goal: &str) -> (String, Value) {
    let id = stack.submit(goal, "auto", 50_000).await;
    let task = stack.finished(&id).await;
    (id, task)
}

#[tokio::test]
async fn a_few_call_read_goes_direct_until_its_kinds_record_says_otherwise() {
    let settings = EngineSettings {
        direct_cold_start_calls: 2,
        ..EngineSettings::default()
    };
    let stack = Stack::start_with("gate_cold_start.json", settings).await;

    // No record for `lookup`: one estimated call, read-only, so direct, verified.
    let (id, task) = run(&stack, QUESTION).await;
    assert_eq!(task["result"]["gate"]["route"], "direct", "{task:#}");
    assert_eq!(task["status"], "succeeded", "{task:#}");
    assert_eq!(task["result"]["verified"], true, "{task:#}");
    assert_eq!(rules(&stack, &id).await, ["cold_start"]);
    assert_eq!(stack.tool_calls("db_size"), 1);

    // One success in one: still direct; this answer fails its verifier.
    let (id, task) = run(&stack, OTHER).await;
    assert_eq!(task["result"]["gate"]["route"], "direct", "{task:#}");
    assert_eq!(task["status"], "failed", "{task:#}");
    assert!(has_rule(&stack, &id, "direct_reliable").await, "{task:#}");

    // One failure in two: below 0.9, so the same question is now planned, and verified.
    let (id, task) = run(&stack, QUESTION).await;
    assert_eq!(task["result"]["gate"]["route"], "plan", "{task:#}");
    assert_eq!(task["status"], "succeeded", "{task:#}");
    assert!(has_rule(&stack, &id, "direct_unreliable").await, "{task:#}");
    let (_, gate) = stack.get("/v1/stats/gate").await;
    assert_eq!(gate["direct_success_by_kind"]["lookup"], 0.5, "{gate}");

    // A change is never sent direct by the cold start.
    let (id, task) = run(&stack, DESTRUCTIVE).await;
    assert_eq!(task["result"]["gate"]["route"], "plan", "{task:#}");
    assert!(has_rule(&stack, &id, "touches_writes").await, "{task:#}");
    assert_eq!(stack.sim.stats().tools["drop_database"].calls, 1);
    stack.stop().await;
}
