//! A repair changes the question, and a question already answered is not replanned, through
//! the HTTP API against scenario files: a milestone granted only a distractor that answers
//! "not found" is offered, at its L1, the read-only tools most relevant to the goal (never a
//! side-effecting one); the scripted model uses the right tool only when it is offered, the
//! tool is granted to the milestone, and the task ends verified. A read-only goal its first
//! milestone answered ends verified when a later milestone asks for a new strategy.
// Test code: a failed set-up is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod engine_stack;

use engine_stack::Stack;
use serde_json::json;

#[tokio::test]
async fn a_repair_is_offered_a_relevant_reader_and_the_milestone_is_granted_it() {
    let stack = Stack::start("repair_offer.json").await;
    let id = stack
        .submit(
            "What is the tracking number of order ord-4k2p9?",
            "v2",
            50_000,
        )
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    assert_eq!(task["result"]["verified"], true, "{task:#}");
    let planned = stack.events_of(&id, "milestone.steps_planned").await;
    assert_eq!(planned.len(), 2, "{planned:#?}");
    assert!(planned[0].get("granted").is_none(), "{:#}", planned[0]);
    assert_eq!(planned[1]["level"], "retry_step", "{:#}", planned[1]);
    assert_eq!(planned[1]["granted"], json!(["get_order"]));
    assert_eq!(planned[1]["steps"][0]["tool"], "get_order");
    let (_, plan) = stack.get(&format!("/v1/tasks/{id}/plans/2")).await;
    assert_eq!(
        plan["plan"]["milestones"][0]["tools"],
        json!(["get_customer", "get_order"]),
        "{plan:#}"
    );
    // The side-effecting tool was never offered, so never called.
    let stats = stack.sim.stats();
    let cancelled = stats.tools.get("cancel_order").map_or(0, |t| t.calls);
    assert_eq!(cancelled, 0, "{stats:?}");
    stack.stop().await;
}

/// A read-only goal its first milestone answered: when the second milestone's ladder asks for
/// a new strategy, the verifier is asked first, and the task ends verified without a replan.
#[tokio::test]
async fn a_question_already_answered_ends_verified_before_a_replan() {
    let stack = Stack::start("answered_early.json").await;
    let id = stack
        .submit(
            "Which build of the billing service is deployed?",
            "v2",
            50_000,
        )
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    assert_eq!(task["result"]["verified"], true, "{task:#}");
    assert_eq!(
        task["result"]["extra"]["unfinished_milestone"], "m2",
        "{task:#}"
    );
    let repairs = stack.events_of(&id, "repair.started").await;
    let l3 = repairs
        .iter()
        .filter(|r| r["level"] == "replan_strategy")
        .count();
    assert_eq!(l3, 1, "m2 asked for a new strategy: {repairs:#?}");
    assert_eq!(
        stack.events_of(&id, "plan.accepted").await.len(),
        1,
        "no second plan"
    );
    let verdicts = stack.events_of(&id, "verifier.decided").await;
    assert_eq!(verdicts.len(), 1, "{verdicts:#?}");
    assert_eq!(verdicts[0]["verified"], true);
    stack.stop().await;
}

/// A milestone that set out to make a change is not done by reads alone: a repair that reads
/// instead of refunding passes no check, and the refund of the order the read returned does.
#[tokio::test]
async fn a_milestone_that_set_out_to_change_is_not_passed_by_a_read() {
    let stack = Stack::start("change_not_by_reads.json").await;
    let id = stack
        .submit(
            "Find the latest order of customer C-1042, refund it and report the refund id",
            "v2",
            50_000,
        )
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let decided = stack.events_of(&id, "monitor.decided").await;
    assert!(
        decided.iter().any(|d| d["decision"] == "failing"
            && d["reason"]
                .as_str()
                .is_some_and(|r| r.contains("no change was made"))),
        "{decided:#?}"
    );
    assert_eq!(
        decided.last().map(|d| &d["decision"]),
        Some(&json!("passed"))
    );
    let refunds = stack.sim.stats().tools["refund_order"].calls;
    assert_eq!(refunds, 2, "the guessed refund and the right one");
    stack.stop().await;
}

/// A failed answer that names the tool to use ("to recover: call locate") gets it offered to
/// the repair first, though other readers share more words with the goal.
#[tokio::test]
async fn a_tool_a_failed_answer_names_is_offered_to_the_repair() {
    let stack = Stack::start("named_in_failure.json").await;
    let id = stack
        .submit(
            "Where is the config file of the billing service kept?",
            "v2",
            50_000,
        )
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let planned = stack.events_of(&id, "milestone.steps_planned").await;
    assert_eq!(planned.len(), 2, "{planned:#?}");
    assert_eq!(planned[1]["granted"], json!(["locate"]), "{:#}", planned[1]);
    assert_eq!(planned[1]["steps"][0]["tool"], "locate");
    stack.stop().await;
}
