//! The answer of a failed plan handed to the direct route is judged on the gate's features,
//! through the HTTP API on the in-process simulator (`knowledge_handover.json`, strategy `v2`):
//! before handing over, the gate model is asked once, as an `auto` decision asks it. Where it
//! finds nothing to plan, the loop's answer is judged as a direct answer to a knowledge
//! question; where it expects a read, the answer needs a successful call behind it, as it does
//! without the model's answer (`tests/repair_recut.rs`).
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

#[tokio::test]
async fn a_knowledge_answer_the_gate_model_agrees_on_is_claimed_after_a_handover() {
    let stack = Stack::start("knowledge_handover.json").await;
    let id = stack
        .submit(
            "What is the capital of Australia? Reply in one word.",
            "v2",
            100_000,
        )
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    assert_eq!(task["result"]["verified"], true, "{task:#}");
    assert_eq!(task["result"]["extra"]["answer"], "Canberra", "{task:#}");
    let declined = stack.events_of(&id, "plan.declined").await;
    assert_eq!(declined.len(), 1, "{declined:#?}");
    assert_eq!(declined[0]["handed_over"], true, "{declined:#?}");
    assert_eq!(declined[0]["model_agrees"], true, "{declined:#?}");
    // Answered at once: no call behind it, and none needed.
    assert_eq!(stack.tool_calls("search"), 0);
    let stats = stack.sim.stats();
    assert_eq!(stats.llm.by_purpose.get("gate"), Some(&1), "asked once");
    stack.stop().await;
}

#[tokio::test]
async fn a_handed_over_answer_needs_a_call_where_the_gate_model_expects_one() {
    let stack = Stack::start("knowledge_handover.json").await;
    // The heuristic finds no read verb here, so the failed plan is handed over; the gate model
    // expects one read, so the loop's answer at once is returned, not claimed.
    let id = stack
        .submit(
            "What is the status of ticket OPS-412? Answer at once.",
            "v2",
            100_000,
        )
        .await;
    let task = stack.finished(&id).await;
    let declined = stack.events_of(&id, "plan.declined").await;
    assert_eq!(declined.len(), 1, "{declined:#?}");
    assert_eq!(declined[0]["handed_over"], true, "{declined:#?}");
    assert_eq!(declined[0]["model_agrees"], false, "{declined:#?}");
    assert_eq!(task["status"], "failed", "{task:#}");
    assert_eq!(task["result"]["verified"], false, "{task:#}");
    assert!(
        task["result"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("no evidence")),
        "{task:#}"
    );
    let stats = stack.sim.stats();
    assert_eq!(stats.llm.by_purpose.get("gate"), Some(&1), "asked once");
    assert_eq!(stats.llm.by_purpose.get("verifier"), None, "not judged");
    stack.stop().await;
}
