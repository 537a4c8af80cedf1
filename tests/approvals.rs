//! Approvals through the HTTP API against the simulator's `approvals.json`, on both backends:
//! a side-effecting call waits for a sign-off bound to its digest (a stale digest is refused,
//! nothing runs meanwhile), a rejected call is repaired, and after the L2 rewrite only the
//! changed call is asked again; a plan sent back to revise becomes a `new_constraint` version
//! carrying the comment, which is approved and runs. Bad decisions are refused in plain words.
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

const GOAL: &str = "Fetch the prices, write them in a note and publish it";

async fn submit(stack: &Stack, approval: &str) -> String {
    let (status, task) = stack
        .post_task(
            &json!({"goal": GOAL, "strategy": "v2", "approval": approval,
            "budget": {"tokens": 100_000, "tool_calls": 50, "wall_ms": 600_000}}),
        )
        .await;
    assert_eq!(status, 202, "{task}");
    assert_eq!(task["approval"], approval);
    task["id"].as_str().expect("id").to_string()
}

async fn decide(stack: &Stack, id: &str, approval: u64, body: &Value) -> (u16, Value) {
    let response = stack
        .client
        .post(format!("{}/v1/tasks/{id}/approvals/{approval}", stack.base))
        .json(body)
        .send()
        .await
        .expect("POST approval");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Waits until the task waits on its `n`th request, and returns that request.
async fn pending(stack: &Stack, id: &str, n: usize) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (_, task) = stack.get(&format!("/v1/tasks/{id}")).await;
        let (_, list) = stack.get(&format!("/v1/tasks/{id}/approvals")).await;
        let items = list["items"].as_array().cloned().unwrap_or_default();
        if task["status"] == "awaiting_approval" && items.len() == n {
            let last = items[n - 1].clone();
            assert_eq!(last["state"], "pending", "{last:#}");
            return last;
        }
        assert!(
            !matches!(task["status"].as_str(), Some("succeeded" | "failed")),
            "the task ended instead of waiting on request {n}: {task:#} {list:#}"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "no request {n}: {list:#}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn called(request: &Value) -> Vec<(String, Value)> {
    request["request"]["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .map(|c| {
            (
                c["tool"].as_str().unwrap_or_default().to_string(),
                c["args"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn calls_wait_for_their_sign_off_and_a_rewrite_asks_only_what_changed_on_sqlite() {
    steps(Stack::start("approvals.json").await).await;
}

#[tokio::test]
async fn calls_wait_for_their_sign_off_and_a_rewrite_asks_only_what_changed_on_postgres() {
    steps(Stack::start_pg("approvals.json").await).await;
}

async fn steps(stack: Stack) {
    let id = submit(&stack, "steps").await;
    let first = pending(&stack, &id, 1).await;
    assert_eq!(first["kind"], "steps");
    let note = json!({"title": "prices", "text": "13 USD"});
    assert_eq!(called(&first), [("write_note".to_string(), note.clone())]);
    // The read-only fetch ran; the write waits, and no worker holds the task.
    assert_eq!(stack.tool_calls("fetch_prices"), 1);
    assert_eq!(stack.tool_calls("write_note"), 0);

    // A digest that is not the pending request's approves nothing, and writes nothing.
    let stale = json!({"decision": "approve", "digest": "0".repeat(64)});
    let (status, problem) = decide(&stack, &id, 1, &stale).await;
    assert_eq!(status, 409, "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("digest")
    );
    let again = pending(&stack, &id, 1).await;
    assert_eq!(again["digest"], first["digest"]);

    let approve = |request: &Value| json!({"decision": "approve", "digest": request["digest"]});
    let (status, decided) = decide(&stack, &id, 1, &approve(&first)).await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(
        (decided["state"].as_str(), decided["decided_by"].as_str()),
        (Some("approved"), Some("dev"))
    );
    // Decided once: a second decision is refused.
    let (status, _) = decide(&stack, &id, 1, &approve(&first)).await;
    assert_eq!(status, 409);

    // The next call waits on its own request; a person rejects it with the right channel.
    let second = pending(&stack, &id, 2).await;
    assert_eq!(
        called(&second),
        [("publish".to_string(), json!({"channel": "ops-typo"}))]
    );
    let reject = json!({"decision": "reject", "digest": second["digest"],
                        "comment": "publish to the ops channel"});
    let (status, decided) = decide(&stack, &id, 2, &reject).await;
    assert_eq!(status, 200, "{decided}");

    // The rejection is the call's refusal; the L2 rewrite keeps the approved write (answered
    // from its receipt) and only the changed publish is asked again.
    let third = pending(&stack, &id, 3).await;
    assert_eq!(
        called(&third),
        [("publish".to_string(), json!({"channel": "ops"}))]
    );
    let (status, _) = decide(&stack, &id, 3, &approve(&third)).await;
    assert_eq!(status, 200);

    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    assert_eq!(
        stack.tool_calls("write_note"),
        1,
        "the approved write ran once"
    );
    assert_eq!(
        stack.tool_calls("publish"),
        1,
        "the rejected call never reached the tool"
    );
    let refused: Vec<Value> = stack
        .events_of(&id, "step.finished")
        .await
        .into_iter()
        .filter(|s| s["tool"] == "publish" && s["ok"] == false)
        .collect();
    assert!(!refused.is_empty());
    assert!(
        refused[0]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("publish to the ops channel")
    );
    let decided = stack.events_of(&id, "approval.decided").await;
    assert_eq!(decided.len(), 3, "{decided:#?}");
    assert!(decided.iter().all(|d| d["by"] == "dev"));
    assert_eq!(stack.events_of(&id, "approval.requested").await.len(), 3);
    stack.stop().await;
}

#[tokio::test]
async fn a_plan_sent_back_to_revise_is_planned_again_with_the_comment_on_sqlite() {
    revised(Stack::start("approvals.json").await).await;
}

#[tokio::test]
async fn a_plan_sent_back_to_revise_is_planned_again_with_the_comment_on_postgres() {
    revised(Stack::start_pg("approvals.json").await).await;
}

async fn revised(stack: Stack) {
    let id = submit(&stack, "plan").await;
    let first = pending(&stack, &id, 1).await;
    assert_eq!(first["kind"], "plan");
    assert_eq!(first["request"]["plan_version"], 1);
    let ids = |request: &Value| -> Vec<String> {
        request["request"]["milestones"]
            .as_array()
            .expect("milestones")
            .iter()
            .map(|m| m["id"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(ids(&first), ["m1", "m2"]);
    assert_eq!(
        stack.tool_calls("fetch_prices"),
        0,
        "nothing runs before the sign-off"
    );

    let bare = json!({"decision": "revise", "digest": first["digest"]});
    let (status, problem) = decide(&stack, &id, 1, &bare).await;
    assert_eq!(status, 422, "a revise needs a comment: {problem}");
    const SAID: &str = "publish it to the ops channel";
    let revise = json!({"decision": "revise", "digest": first["digest"], "comment": SAID});
    let (status, decided) = decide(&stack, &id, 1, &revise).await;
    assert_eq!(status, 200, "{decided}");
    assert_eq!(decided["state"], "revised");

    let second = pending(&stack, &id, 2).await;
    assert_eq!(second["request"]["plan_version"], 2);
    assert_eq!(ids(&second), ["m1", "m2ops"]);
    let (_, plans) = stack.get(&format!("/v1/tasks/{id}/plans")).await;
    let reasons: Vec<&str> = plans["items"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|v| v["reason"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(reasons, ["initial", "new_constraint"]);
    let raised = stack.events_of(&id, "plan.constraint_raised").await;
    assert_eq!(raised.len(), 1, "{raised:#?}");
    assert_eq!(
        (
            raised[0]["text"].as_str(),
            raised[0]["source"]["kind"].as_str()
        ),
        (Some(SAID), Some("person"))
    );

    let approve = json!({"decision": "approve", "digest": second["digest"]});
    let (status, _) = decide(&stack, &id, 2, &approve).await;
    assert_eq!(status, 200);
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let stats = stack.sim.stats();
    assert_eq!(stats.llm.by_purpose.get("strategic"), Some(&2));
    assert_eq!(stack.tool_calls("publish"), 1);
    // The ladder's own strategy replan was not used up by the person's.
    assert_eq!(
        task["result"]["metrics"]["repairs_replan_strategy"], 0,
        "{task:#}"
    );
    stack.stop().await;
}

#[tokio::test]
async fn bad_decisions_and_asks_are_refused_in_plain_words() {
    let stack = Stack::start("approvals.json").await;
    // A strategy without a plan takes `plan` (its calls are signed off instead); an unknown
    // mode is refused.
    let (status, task) = stack
        .post_task(&json!({"goal": GOAL, "strategy": "reactive", "approval": "plan"}))
        .await;
    assert_eq!(
        (status, task["approval"].as_str()),
        (202, Some("plan")),
        "{task}"
    );
    let (status, _) = stack
        .post_task(&json!({"goal": GOAL, "approval": "always"}))
        .await;
    assert_eq!(status, 422);

    let id = submit(&stack, "steps").await;
    let first = pending(&stack, &id, 1).await;
    let digest = first["digest"].clone();
    for (approval, body, want) in [
        ("9", json!({"decision": "approve", "digest": digest}), 404),
        ("x", json!({"decision": "approve", "digest": digest}), 400),
        ("1", json!({"decision": "maybe", "digest": digest}), 422),
        (
            "1",
            json!({"decision": "approve", "digest": digest, "by": "me"}),
            422,
        ),
        (
            "1",
            json!({"decision": "revise", "digest": digest, "comment": "no"}),
            422,
        ),
        ("1", json!({"decision": "approve"}), 422),
    ] {
        let response = stack
            .client
            .post(format!("{}/v1/tasks/{id}/approvals/{approval}", stack.base))
            .json(&body)
            .send()
            .await
            .expect("POST");
        assert_eq!(response.status().as_u16(), want, "{approval} {body}");
    }
    // Nothing was decided by any of them.
    let still = pending(&stack, &id, 1).await;
    assert_eq!(still["state"], "pending");
    // A cancelled task takes no decision.
    let response = stack
        .client
        .post(format!("{}/v1/tasks/{id}/cancel", stack.base))
        .send()
        .await
        .expect("cancel");
    assert!(response.status().is_success());
    let (status, problem) = decide(
        &stack,
        &id,
        1,
        &json!({"decision": "approve", "digest": digest}),
    )
    .await;
    assert_eq!(status, 409, "{problem}");
    assert_eq!(stack.tool_calls("write_note"), 0);
    stack.stop().await;
}
