//! A failed plan handed to the direct route is judged on the gate's features, through the HTTP
//! API on the in-process simulator (`knowledge_handover.json`, strategy `v2`): before handing
//! over, the gate model is asked once, as an `auto` decision asks it. Where it finds nothing to
//! plan, the loop's answer is judged as a direct answer to a knowledge question; where it
//! expects a read, nothing is handed over. Without its answer the heuristic decides, and the
//! answer needs a call behind it (`tests/repair_recut.rs`).
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
    assert_eq!(declined[0]["model_backed"], true, "{declined:#?}");
    // Answered at once: no call behind it, and none needed.
    assert_eq!(stack.tool_calls("search"), 0);
    let stats = stack.sim.stats();
    assert_eq!(stats.llm.by_purpose.get("gate"), Some(&1), "asked once");
    stack.stop().await;
}

#[tokio::test]
async fn a_goal_the_gate_model_expects_a_read_for_is_not_handed_over() {
    let stack = Stack::start("knowledge_handover.json").await;
    // The heuristic finds no read verb here; the gate model expects one read.
    let id = stack
        .submit("What is the status of ticket OPS-412?", "v2", 100_000)
        .await;
    let task = stack.finished(&id).await;
    assert_ne!(task["status"], "succeeded", "{task:#}");
    assert!(stack.events_of(&id, "plan.declined").await.is_empty());
    assert!(stack.events_of(&id, "direct.round").await.is_empty());
    let stats = stack.sim.stats();
    assert_eq!(stats.llm.by_purpose.get("gate"), Some(&1), "asked once");
    stack.stop().await;
}
