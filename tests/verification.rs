//! Verification that cannot be talked into success, through the HTTP API against the
//! simulator's scenario files (and, for an unreachable model, a real `cairn serve`):
//! an answer with no tool receipt is not verified, no verdict is not a success, and model
//! failures are named in the result.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod engine_stack;
mod serve_process;

use std::time::Duration;

use engine_stack::Stack;
use serde_json::{Value, json};
use serve_process::{Db, Serve};

fn model_calls(stats: &Value, purpose: &str) -> u64 {
    stats["llm"]["by_purpose"][purpose].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_direct_answer_with_no_tool_receipt_is_not_verified() {
    let stack = Stack::start("direct_no_evidence.json").await;
    let id = stack
        .submit("Look up who owns services A and B", "direct", 50_000)
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "failed", "{task:#}");
    assert_eq!(task["result"]["verified"], false);
    assert_eq!(task["result"]["cause"], "no_evidence");
    let stats: Value = reqwest::get(format!("{}/sim/stats", stack.sim.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // The claim was never shown to the verifier: programmatic evidence came first.
    assert_eq!(model_calls(&stats, "tactical"), 1, "{stats:#}");
    assert_eq!(model_calls(&stats, "verifier"), 0, "{stats:#}");
    // Every model call carried its answer's schema and a prompt version.
    let events = stack.events(&id).await;
    let round = events
        .iter()
        .find(|e| e["kind"] == "direct.round")
        .expect("a direct round");
    assert!(
        round["data"]["prompt"]
            .as_str()
            .is_some_and(|p| p.starts_with("direct@")),
        "{round:#}"
    );
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn no_verdict_means_not_verified_never_succeeded() {
    let stack = Stack::start("verifier_unusable.json").await;
    let id = stack
        .submit("Look up who owns service A", "direct", 50_000)
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "failed", "{task:#}");
    assert_eq!(task["result"]["verified"], Value::Null);
    assert_eq!(task["result"]["cause"], "unverified");
    assert!(
        task["result"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("unverified")),
        "{task:#}"
    );
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_model_is_named_in_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.toml");
    std::fs::write(
        &tools,
        "[[tools]]\nname = \"lookup\"\ndescription = \"Look something up.\"\n\
         url = \"http://127.0.0.1:1/lookup\"\nside_effects = false\n\
         args_schema = { type = \"object\" }\n",
    )
    .unwrap();
    let db = dir.path().join("cairn.db");
    let tools_path = tools.display().to_string();
    let serve = Serve::start(
        Db::Sqlite(&db),
        &[
            // Nothing listens on port 1: every model call fails to connect.
            ("CAIRN_LLM_DEFAULT_BASE_URL", "http://127.0.0.1:1"),
            ("CAIRN_LLM_DEFAULT_MODEL", "none"),
            ("CAIRN_TOOLS_FILE", tools_path.as_str()),
        ],
    )
    .await;
    let base = format!("http://{}", serve.addr);
    let client = reqwest::Client::new();
    let created: Value = client
        .post(format!("{base}/v1/tasks"))
        .json(
            &json!({"goal": "Look up who owns service A", "strategy": "direct",
                      "budget": {"tokens": 10_000, "tool_calls": 10, "wall_ms": 120_000}}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_string();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let task = loop {
        let task: Value = client
            .get(format!("{base}/v1/tasks/{id}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if matches!(
            task["status"].as_str(),
            Some("succeeded" | "failed" | "budget_exhausted")
        ) {
            break task;
        }
        assert!(tokio::time::Instant::now() < deadline, "{task:#}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(task["status"], "failed", "{task:#}");
    assert_eq!(task["result"]["cause"], "model_unreachable", "{task:#}");
    assert!(
        task["result"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("model_unreachable")),
        "{task:#}"
    );
    serve.kill().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_side_effect_with_a_placeholder_argument_is_refused_before_any_call() {
    let stack = Stack::start("placeholder_args.json").await;
    let id = stack
        .submit(
            "Look up who owns service A and write them a note that it restarts tonight",
            "direct",
            50_000,
        )
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "failed", "{task:#}");
    let events = stack.events(&id).await;
    let drift = events
        .iter()
        .find(|e| e["kind"] == "executor.drift")
        .expect("an executor.drift event");
    assert_eq!(drift["data"]["tool"], "write_note");
    assert!(
        drift["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("placeholder") && r.contains("/to")),
        "{drift:#}"
    );
    let stats: Value = reqwest::get(format!("{}/sim/stats", stack.sim.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["tools"]["write_note"]["calls"], 0, "{stats:#}");
    assert_eq!(stats["tools"]["lookup"]["calls"], 1, "{stats:#}");
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_named_target_no_tool_call_touched_fails_the_goal_without_asking_the_model() {
    let stack = Stack::start("untouched_target.json").await;
    let id = stack
        .submit("Look up who owns services A and B", "direct", 50_000)
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "failed", "{task:#}");
    assert_eq!(task["result"]["verified"], false, "{task:#}");
    let events = stack.events(&id).await;
    let decided = events
        .iter()
        .find(|e| e["kind"] == "verifier.decided")
        .expect("a verifier.decided event");
    assert_eq!(decided["data"]["evidence"], "programmatic", "{decided:#}");
    assert_eq!(decided["data"]["untouched"], json!(["B"]), "{decided:#}");
    let stats: Value = reqwest::get(format!("{}/sim/stats", stack.sim.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(model_calls(&stats, "verifier"), 0, "{stats:#}");
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_first_plan_for_a_question_goes_direct_and_for_a_change_is_refused() {
    let stack = Stack::start("nothing_to_plan.json").await;
    let question = stack
        .submit("What is the capital of Australia?", "v2", 50_000)
        .await;
    let task = stack.finished(&question).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    assert_eq!(task["result"]["verified"], true, "{task:#}");
    assert_eq!(task["result"]["extra"]["answer"], "Canberra", "{task:#}");
    let events = stack.events(&question).await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert!(kinds.contains(&"plan.declined"), "{kinds:?}");
    assert!(!kinds.contains(&"plan.accepted"), "{kinds:?}");
    assert!(kinds.contains(&"direct.round"), "{kinds:?}");
    let (status, plans) = stack.get(&format!("/v1/tasks/{question}/plans")).await;
    assert_eq!(status, 200);
    assert_eq!(plans["items"], json!([]), "{plans:#}");

    let change = stack
        .submit("Drop the staging database", "v2", 50_000)
        .await;
    let task = stack.finished(&change).await;
    assert_eq!(task["status"], "failed", "{task:#}");
    assert_eq!(task["result"]["extra"]["failure"], "planner", "{task:#}");
    let events = stack.events(&change).await;
    let refused: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "plan.refused")
        .collect();
    assert!(!refused.is_empty());
    for event in &refused {
        let errors = event["data"]["errors"].as_str().unwrap_or_default();
        assert!(errors.contains("names a change"), "{event:#}");
    }
    assert!(
        events
            .iter()
            .all(|e| e["kind"] != "plan.declined" && e["kind"] != "direct.round"),
        "a change never goes direct: {events:#?}"
    );
    stack.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_quoted_change_is_material_and_the_empty_plan_for_it_goes_direct() {
    // The destructive words are inside quotes: text the goal works on, not a change it asks for.
    let stack = Stack::start("nothing_to_plan.json").await;
    let id = stack
        .submit(
            "Rewrite more clearly: \"drop the staging database asap\".",
            "v2",
            50_000,
        )
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let kinds: Vec<String> = stack
        .events(&id)
        .await
        .iter()
        .filter_map(|e| e["kind"].as_str().map(str::to_string))
        .collect();
    assert!(kinds.iter().any(|k| k == "plan.declined"), "{kinds:?}");
    assert!(!kinds.iter().any(|k| k == "plan.refused"), "{kinds:?}");
    assert_eq!(stack.tool_calls("drop_database"), 0);
    stack.stop().await;
}
