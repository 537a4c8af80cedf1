//! The embedded default, as a newcomer first runs it: `cairn serve` with no model and no database
//! configured (the built-in simulator, an SQLite file). The README's walkthrough goal and goals of
//! other shapes (several targets, a read-only question, a write, no named target) end verified;
//! with simulated latency a task is seen running and can be cancelled.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod serve_process;

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use serve_process::{Db, Serve, get_task};

/// The real engine (not the lifecycle tests' scripted one) on the built-in simulator.
const EMBEDDED: &[(&str, &str)] = &[("CAIRN_TEST_MINIMAL_ENGINE", "false")];

async fn post(addr: SocketAddr, goal: &str) -> String {
    let response = reqwest::Client::new()
        .post(format!("http://{addr}/v1/tasks"))
        .json(&json!({ "goal": goal }))
        .send()
        .await
        .expect("POST /v1/tasks");
    assert_eq!(response.status(), reqwest::StatusCode::ACCEPTED, "{goal}");
    let task: Value = response.json().await.expect("task JSON");
    task["id"].as_str().expect("task id").to_string()
}

/// Reads the task until `done` holds (bounded).
async fn wait_for(addr: SocketAddr, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let id = id.parse().expect("task id");
    loop {
        let task = get_task(addr, id).await;
        if done(&task) {
            return task;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}: {task:#}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Every `"goal": "..."` the README's command blocks submit.
fn readme_goals() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    readme
        .split("\"goal\": \"")
        .skip(1)
        .filter_map(|rest| rest.split_once('"').map(|(goal, _)| goal.to_string()))
        .collect()
}

fn ended(task: &Value) -> bool {
    matches!(
        task["status"].as_str(),
        Some("succeeded" | "failed" | "cancelled" | "budget_exhausted")
    )
}

#[tokio::test]
async fn the_walkthrough_goals_and_other_shapes_end_verified() {
    let dir = tempfile::tempdir().expect("temp dir");
    let serve = Serve::start(Db::Sqlite(&dir.path().join("cairn.db")), EMBEDDED).await;
    // The README's walkthrough goals, as a newcomer pastes them, then shapes it does not show:
    // one target read, a question, several targets written, no named target read or written.
    let mut goals = readme_goals();
    assert!(!goals.is_empty(), "README.md shows no goal");
    goals.extend(
        [
            "Look up who owns service A",
            "Which services depend on service C?",
            "Restart services A and B",
            "Summarise the open incidents of this week",
            "Create a ticket for the billing team about the failed export",
        ]
        .map(String::from),
    );
    let mut ids = Vec::new();
    for goal in &goals {
        ids.push((goal, post(serve.addr, goal).await));
    }
    for (goal, id) in ids {
        let task = wait_for(serve.addr, &id, goal, ended).await;
        assert_eq!(task["status"], "succeeded", "{goal}: {:#}", task["result"]);
        assert_eq!(
            task["result"]["verified"], true,
            "{goal}: {:#}",
            task["result"]
        );
    }
    serve.kill().await;
}

#[tokio::test]
async fn with_simulated_latency_a_task_is_seen_running_and_cancelled() {
    let dir = tempfile::tempdir().expect("temp dir");
    let env = [EMBEDDED[0], ("CAIRN_SIM_LATENCY_MS", "400")];
    let serve = Serve::start(Db::Sqlite(&dir.path().join("cairn.db")), &env).await;
    let goal = "Rename config key db.url to db.dsn in services A, B and C";
    let id = post(serve.addr, goal).await;
    wait_for(serve.addr, &id, "the task to run", |task| {
        task["status"] == "running"
    })
    .await;
    let cancel = reqwest::Client::new()
        .post(format!("http://{}/v1/tasks/{id}/cancel", serve.addr))
        .send()
        .await
        .expect("cancel");
    assert_eq!(cancel.status(), reqwest::StatusCode::OK);
    let task = wait_for(serve.addr, &id, "the cancelled end", ended).await;
    assert_eq!(task["status"], "cancelled", "{task:#}");
    serve.kill().await;
}
