//! A task's own tool list, through the HTTP API against the simulator: the API refuses names
//! that are not registered tools, and the engine offers a task only the tools it lists, so a
//! plan that needs another tool is refused and that tool is never called.
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
use serde_json::{Value, json};

const WORKED_GOAL: &str = "Rename config key db.url to db.dsn in services A, B, C";

fn body(tools: Value) -> Value {
    json!({"goal": WORKED_GOAL, "strategy": "v2", "tools": tools,
           "budget": {"tokens": 200_000, "tool_calls": 100, "wall_ms": 600_000}})
}

#[tokio::test]
async fn names_that_are_not_registered_tools_are_refused_before_anything_is_written() {
    let stack = Stack::start("worked_example.json").await;
    let cases = [
        (
            json!(["search", "deploy"]),
            "\"deploy\" is not a registered tool",
        ),
        (
            json!(["search", "search"]),
            "\"search\" is listed more than once",
        ),
        (json!([""]), "is not a tool name"),
        (
            json!((0..65).map(|i| format!("t{i}")).collect::<Vec<_>>()),
            "at most 64 names",
        ),
        (json!("search"), "tools"),
    ];
    for (tools, says) in cases {
        let (status, problem) = stack.post_task(&body(tools.clone())).await;
        assert_eq!(status, 422, "{tools}: {problem}");
        let detail = problem["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(says), "{tools}: {problem}");
    }
    let (_, page) = stack.get("/v1/tasks").await;
    assert_eq!(page["items"], json!([]), "nothing was written");
    stack.stop().await;
}

#[tokio::test]
async fn the_engine_offers_a_task_only_its_own_tools() {
    let stack = Stack::start("worked_example.json").await;
    // The scripted plan edits files; without `edit_file` it names a tool the task may not use.
    let (status, created) = stack.post_task(&body(json!(["search", "run"]))).await;
    assert_eq!(status, 202, "{created}");
    assert_eq!(created["tools"], json!(["search", "run"]));
    let id = created["id"].as_str().expect("id").to_string();
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "failed", "{task}");
    let events = stack.events(&id).await;
    assert_eq!(events[0]["data"]["tools"], json!(["search", "run"]));
    let refused: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "plan.refused")
        .collect();
    assert!(!refused.is_empty(), "the plan was refused");
    assert!(
        refused
            .iter()
            .all(|e| e["data"]["errors"].to_string().contains("edit_file")),
        "{refused:?}"
    );
    assert!(events.iter().all(|e| e["kind"] != "plan.accepted"));
    assert_eq!(stack.sim.stats().tools["edit_file"].calls, 0);
    stack.stop().await;
}

#[tokio::test]
async fn a_task_listing_every_tool_it_needs_runs_as_before() {
    let stack = Stack::start("worked_example.json").await;
    let (status, created) = stack
        .post_task(&body(json!(["search", "edit_file", "run"])))
        .await;
    assert_eq!(status, 202, "{created}");
    let id = created["id"].as_str().expect("id").to_string();
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task}");
    assert_eq!(task["tools"], json!(["search", "edit_file", "run"]));
    // Without a list the task shows none and may use every registered tool.
    let plain = stack.submit(WORKED_GOAL, "v2", 200_000).await;
    let (_, plain) = stack.get(&format!("/v1/tasks/{plain}")).await;
    assert!(plain.get("tools").is_none(), "{plain}");
    stack.stop().await;
}
