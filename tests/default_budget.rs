//! A task submitted without a budget, or with only some of its units, gets the operator's default
//! budget for what it left out; a body the server cannot read is answered in plain words (the
//! field's path and what is wrong), never in the parser's.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod api_support;
mod common;

use api_support::{Db, TestServer, assert_problem, test_config};
use cairn::domain::task::{Budget, Task};
use serde_json::{Value, json};

async fn submit(server: &TestServer, body: Value) -> Task {
    let response = server.post_json("/v1/tasks", &body).await;
    assert_eq!(response.status(), 202, "{body}");
    response.json().await.expect("task JSON")
}

#[tokio::test]
async fn an_omitted_budget_or_unit_is_the_default_one() {
    let db = Db::create().await;
    let store = db.store().await;
    let operator = Budget {
        tokens: 7_000,
        tool_calls: 7,
        wall_ms: 70_000,
        cost: None,
    };
    let config = cairn::config::Config {
        default_budget: operator,
        ..test_config()
    };
    let server = TestServer::start(store.clone(), config).await;

    let omitted = submit(&server, json!({"goal": "g"})).await;
    assert_eq!(omitted.budget, operator);
    let null = submit(&server, json!({"goal": "g", "budget": null})).await;
    assert_eq!(null.budget, operator);
    let partial = submit(
        &server,
        json!({"goal": "g", "budget": {"tokens": 500, "wall_ms": null}}),
    )
    .await;
    assert_eq!(
        partial.budget,
        Budget {
            tokens: 500,
            ..operator
        }
    );
    // The stored task keeps the budget it was given, as the API reads it back.
    let read: Task = server
        .client
        .get(server.url(&format!("/v1/tasks/{}", partial.id)))
        .send()
        .await
        .expect("GET")
        .json()
        .await
        .expect("task JSON");
    assert_eq!(read.budget, partial.budget);
    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn the_built_in_default_budget_applies_without_configuration() {
    let db = Db::create().await;
    let store = db.store().await;
    let server = TestServer::start(store.clone(), test_config()).await;
    let task = submit(&server, json!({"goal": "g"})).await;
    assert_eq!(task.budget, Budget::DEFAULT);
    server.shutdown().await;
    db.drop().await;
}

#[tokio::test]
async fn a_wrong_body_is_answered_in_plain_words() {
    let db = Db::create().await;
    let store = db.store().await;
    let server = TestServer::start(store.clone(), test_config()).await;
    let cases = [
        (
            json!({"goal": "g", "budget": {"tokens": "many"}}),
            "`budget.tokens` must be a non-negative whole number, got string \"many\"",
        ),
        (json!({"budget": {"tokens": 5}}), "`goal` is required"),
        (
            json!({"goal": "g", "budget": {"dollars": 3}}),
            "`budget.dollars` is not a known field",
        ),
        (
            json!({"goal": "g", "priority": 1}),
            "`priority` is not a known field",
        ),
        (
            json!({"goal": "g", "strategy": "yolo"}),
            "`strategy` must be one of",
        ),
    ];
    for (body, expected) in cases {
        let response = server.post_json("/v1/tasks", &body).await;
        let problem = assert_problem(response, 422, "/problems/validation").await;
        let detail = problem["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(expected), "{body}: {detail}");
        for internal in ["Failed to deserialize", "at line", "column"] {
            assert!(!detail.contains(internal), "{body}: {detail}");
        }
    }
    server.shutdown().await;
    db.drop().await;
}
