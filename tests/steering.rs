//! Steering a running task through the HTTP API (`POST /v1/tasks/{id}/messages`) against the
//! simulator's `steering.json`, on both backends: a person's message mid-run becomes a plan
//! version with reason `new_constraint` that keeps the finished milestone, and the failure
//! ladder's own strategy replan is still there afterwards. Bad messages are refused in plain
//! words and write nothing.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod engine_stack;

use std::time::Duration;

use engine_stack::{Stack, WAIT};
use serde_json::{Value, json};

const GOAL: &str = "Fetch the prices and write them in a note";
const SAID: &str = "quote every price in EUR";

async fn post_message(stack: &Stack, id: &str, body: &Value) -> (u16, Value) {
    let response = stack
        .client
        .post(format!("{}/v1/tasks/{id}/messages", stack.base))
        .json(body)
        .send()
        .await
        .expect("POST messages");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Waits until the task has an event of `kind` whose data `matches`.
async fn wait_for(stack: &Stack, id: &str, kind: &str, matches: impl Fn(&Value) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let seen = stack.events_of(id, kind).await;
        if seen.iter().any(&matches) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "no {kind} event");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn of_m1(data: &Value) -> bool {
    data["milestone"] == "m1"
}

#[tokio::test]
async fn a_message_mid_run_replans_keeping_finished_work_on_sqlite() {
    steered(Stack::start("steering.json").await).await;
}

#[tokio::test]
async fn a_message_mid_run_replans_keeping_finished_work_on_postgres() {
    steered(Stack::start_pg("steering.json").await).await;
}

async fn steered(stack: Stack) {
    let id = stack.submit(GOAL, "v2", 100_000).await;
    // m1's fetch takes 1.5 s: the message arrives while it runs.
    wait_for(&stack, &id, "milestone.started", of_m1).await;
    let (status, message) = post_message(&stack, &id, &json!({"text": SAID})).await;
    assert_eq!(status, 202, "{message}");
    assert_eq!(
        (message["seq"].as_u64(), message["kind"].as_str()),
        (Some(1), Some("constraint"))
    );

    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");

    let sent = stack.events_of(&id, "task.message").await;
    assert_eq!(sent.len(), 1, "{sent:#?}");
    assert_eq!(sent[0]["text"], SAID);
    let raised = stack.events_of(&id, "plan.constraint_raised").await;
    assert_eq!(raised.len(), 1, "{raised:#?}");
    assert_eq!(raised[0]["text"], SAID);
    assert_eq!(raised[0]["source"]["kind"], "person");

    let (_, plans) = stack.get(&format!("/v1/tasks/{id}/plans")).await;
    let reasons: Vec<&str> = plans["items"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|v| v["reason"].as_str().unwrap_or_default())
        .collect();
    // The person's replan, then the ladder's own L3 for the tool that is gone.
    assert_eq!(reasons, ["initial", "new_constraint", "replan_strategy"]);
    let (_, second) = stack.get(&format!("/v1/tasks/{id}/plans/2")).await;
    let milestones = second["plan"]["milestones"].as_array().expect("milestones");
    let m1 = milestones
        .iter()
        .find(|m| m["id"] == "m1")
        .expect("m1 kept");
    assert_eq!(m1["status"], "done", "finished work is kept: {second:#}");
    assert!(milestones.iter().any(|m| m["id"] == "m2eur"));

    let stats = stack.sim.stats();
    assert_eq!(stats.tools["fetch_prices"].calls, 1, "m1 was not run again");
    assert_eq!(stats.tools["write_note"].calls, 1);
    assert_eq!(stats.llm.by_purpose.get("strategic"), Some(&3));

    let (status, listed) = stack.get(&format!("/v1/tasks/{id}/messages")).await;
    assert_eq!(status, 200);
    assert_eq!(listed["items"][0]["text"], SAID);
    // An ended task takes no more messages, and nothing is written.
    let (status, problem) = post_message(&stack, &id, &json!({"text": "and in GBP"})).await;
    assert_eq!(status, 409, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("already ended")
    );
    assert_eq!(stack.events_of(&id, "task.message").await.len(), 1);
    stack.stop().await;
}

/// Measured live on the 1.5B model: a step list written just before a person's "no note to B's
/// owner" was carried into the new plan version and wrote that note. Now the steps a carried
/// milestone had not run are written again, by a planner shown the constraint.
#[tokio::test]
async fn steps_written_before_a_message_are_written_again_not_run() {
    let stack = Stack::start("steering_in_flight.json").await;
    let id = stack
        .submit(
            "Write a note to the owners of services A and B",
            "v2",
            100_000,
        )
        .await;
    // The note to A's owner takes 1.5 s: the message arrives while it is being written.
    wait_for(&stack, &id, "milestone.steps_planned", of_m1).await;
    let said = json!({"text": "only the owner of service A gets a note"});
    let (status, message) = post_message(&stack, &id, &said).await;
    assert_eq!(status, 202, "{message}");
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let notes: Vec<Value> = stack
        .events_of(&id, "step.finished")
        .await
        .into_iter()
        .filter(|s| s["tool"] == "write_note")
        .map(|s| s["args"]["to"].clone())
        .collect();
    assert_eq!(notes, [json!("Priya Raman")], "no note to B's owner");
    let (_, second) = stack.get(&format!("/v1/tasks/{id}/plans/2")).await;
    assert_eq!(second["reason"], "new_constraint", "{second:#}");
    let planned = stack.events_of(&id, "milestone.steps_planned").await;
    assert_eq!(planned.len(), 2, "{planned:#?}");
    assert_eq!(planned[1]["continued"], true, "{planned:#?}");
    assert_eq!(stack.sim.stats().tools["write_note"].calls, 1);
    stack.stop().await;
}

#[tokio::test]
async fn the_act_loop_is_shown_a_message_in_its_next_round() {
    let stack = Stack::start("steering_direct.json").await;
    let id = stack
        .submit("What version of service A is deployed?", "direct", 100_000)
        .await;
    // The first round's get_version call takes 1.5 s: the message arrives while it runs.
    wait_for(&stack, &id, "direct.round", |_| true).await;
    let said = json!({"text": "Answer with the version number alone"});
    let (status, message) = post_message(&stack, &id, &said).await;
    assert_eq!(status, 202, "{message}");
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    assert_eq!(task["result"]["extra"]["answer"], "2.4.1", "{task:#}");
    let raised = stack.events_of(&id, "plan.constraint_raised").await;
    assert_eq!(raised.len(), 1, "{raised:#?}");
    let (_, plans) = stack.get(&format!("/v1/tasks/{id}/plans")).await;
    assert_eq!(
        plans["items"],
        json!([]),
        "the act loop has no plan to replace"
    );
    stack.stop().await;
}

#[tokio::test]
async fn bad_messages_are_refused_in_plain_words_and_write_nothing() {
    let stack = Stack::start("steering.json").await;
    let one_shot = stack.submit(GOAL, "one_shot", 100_000).await;
    let (status, problem) = post_message(&stack, &one_shot, &json!({"text": SAID})).await;
    assert_eq!(status, 409, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("takes no messages")
    );

    let id = stack.submit(GOAL, "v2", 100_000).await;
    let cases = [
        (json!({"text": "   "}), 422),
        (json!({"text": "x".repeat(2001)}), 422),
        (json!({"text": SAID, "kind": "order"}), 422),
        (json!({"text": SAID, "extra": 1}), 422),
        (json!({}), 422),
    ];
    for (body, want) in cases {
        let (status, problem) = post_message(&stack, &id, &body).await;
        assert_eq!(status, want, "{body}: {problem}");
        assert_eq!(problem["status"], want, "a problem+json: {problem}");
    }
    let missing = uuid::Uuid::now_v7();
    let (status, _) = post_message(&stack, &missing.to_string(), &json!({"text": SAID})).await;
    assert_eq!(status, 404);
    let (status, _) = post_message(&stack, "not-a-uuid", &json!({"text": SAID})).await;
    assert_eq!(status, 400);
    let (_, listed) = stack.get(&format!("/v1/tasks/{id}/messages")).await;
    assert_eq!(listed["items"], json!([]));
    assert!(stack.events_of(&id, "task.message").await.is_empty());
    stack.finished(&id).await;
    stack.stop().await;
}
