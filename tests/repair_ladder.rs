//! The repair ladder through the HTTP API against the simulator's scenario files: failure
//! classes decide the rung (a transient timeout is retried unchanged at L1, a wrong result
//! climbs to L2), fingerprints of failed proposals escalate at every level (an L3 identical to
//! the failed plan stops the task), and replan triggers are data (`dependency_failed` names
//! the failed dependency and the blocked milestones, `new_constraint` comes from a tool's
//! answer).
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod engine_stack;

use engine_stack::{Stack, plan_reasons};
use serde_json::Value;

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

fn repairs(events: &[Value], milestone: &str) -> Vec<Value> {
    of_kind(events, "repair.started")
        .into_iter()
        .filter(|e| e["data"]["milestone"] == milestone)
        .map(|e| e["data"].clone())
        .collect()
}

#[tokio::test]
async fn transient_timeouts_once_and_twice_recover_at_l1_unchanged() {
    transient_timeouts(Stack::start("transient_timeouts.json").await).await;
}

#[tokio::test]
async fn transient_timeouts_recover_at_l1_on_postgres() {
    transient_timeouts(Stack::start_pg("transient_timeouts.json").await).await;
}

async fn transient_timeouts(stack: Stack) {
    let id = stack
        .submit("Report yesterday's signups", "v2", 100_000)
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let events = stack.events(&id).await;
    for (milestone, timeouts) in [("m1", 1), ("m2", 2)] {
        let taken = repairs(&events, milestone);
        assert_eq!(taken.len(), timeouts, "{milestone}: {taken:#?}");
        for (i, r) in taken.iter().enumerate() {
            assert_eq!(r["level"], "retry_step", "{r}");
            assert_eq!(r["class"], "transient", "{r}");
            assert_eq!(r["unchanged"], true, "{r}");
            assert_eq!(r["retry"], i as u64 + 1, "{r}");
            assert_eq!(r["backoff_ms"], 200 << i, "{r}");
        }
    }
    assert!(
        !events
            .iter()
            .any(|e| e["kind"] == "repair.started" && e["data"]["level"] != "retry_step"),
        "no L2 or L3"
    );
    assert!(of_kind(&events, "plan.stale").is_empty());
    assert!(of_kind(&events, "milestone.steps_refused").is_empty());
    let stats = stack.sim.stats();
    // No planner was asked again: one tactical call per milestone, one plan.
    assert_eq!(stats.llm.by_purpose.get("tactical"), Some(&2), "{stats:#?}");
    assert_eq!(stats.llm.by_purpose.get("strategic"), Some(&1));
    assert_eq!(stats.tools["query_metrics"].calls, 2);
    assert_eq!(stats.tools["write_report"].calls, 3);
    // An unchanged retry is the same logical call: one idempotency key for the write.
    assert_eq!(stats.tools["write_report"].distinct_keys, 1);
    let (_, plans) = stack.get(&format!("/v1/tasks/{id}/plans")).await;
    assert_eq!(
        plan_reasons(&plans),
        ["initial"],
        "no repair rewrote the plan"
    );
    let (_, stats) = stack.get("/v1/stats").await;
    assert_eq!(stats["repairs"]["retry_step"], 3, "{stats}");
    assert_eq!(stats["repairs"]["replan_milestone"], 0);
    assert_eq!(stats["repairs"]["replan_strategy"], 0);
    stack.stop().await;
}

#[tokio::test]
async fn a_tool_still_failing_after_its_transient_retries_is_unavailable_and_replanned_at_l2() {
    let stack = Stack::start("transient_exhausted.json").await;
    let id = stack.submit("Count the signups", "v2", 100_000).await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let events = stack.events(&id).await;
    let taken = repairs(&events, "m1");
    let rungs: Vec<(&str, &str)> = taken
        .iter()
        .map(|r| {
            (
                r["level"].as_str().unwrap_or_default(),
                r["class"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        rungs,
        [
            ("retry_step", "transient"),
            ("retry_step", "transient"),
            ("replan_milestone", "wrong_result")
        ],
        "{taken:#?}"
    );
    assert_eq!(taken[2]["reason"], "tool_unavailable");
    assert!(
        taken[2]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("after 2 unchanged retries")),
        "{taken:#?}"
    );
    let stats = stack.sim.stats();
    assert_eq!(stats.tools["query_primary"].calls, 3);
    assert_eq!(stats.tools["query_replica"].calls, 1);
    assert_eq!(stats.llm.by_purpose.get("tactical"), Some(&2));
    stack.stop().await;
}

#[tokio::test]
async fn a_wrong_result_climbs_to_l2_and_its_identical_retry_never_runs() {
    let stack = Stack::start("wrong_result_replan.json").await;
    let id = stack
        .submit("Look up the exchange rate", "v2", 100_000)
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let events = stack.events(&id).await;
    let taken = repairs(&events, "m1");
    let levels: Vec<&str> = taken
        .iter()
        .map(|r| r["level"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(levels, ["retry_step", "replan_milestone"], "{taken:#?}");
    assert_eq!(taken[0]["class"], "wrong_result");
    assert_eq!(taken[0]["reason"], "unexpected_observation");
    assert_eq!(taken[1]["escalated_from"], "retry_step");
    // The repeat is refused and asked once more without lookup_rate; the answer to that
    // (lookup_rate again, outside the offer) is refused, and the ladder escalates as it would
    // have on the repeat.
    let refused = of_kind(&events, "milestone.steps_refused");
    assert_eq!(refused.len(), 3, "{refused:#?}");
    assert!(refused[0]["data"]["repeated_fingerprint"].is_string());
    assert_eq!(refused[0]["data"]["reask"], true);
    assert!(refused[1]["data"]["errors"].is_string());
    assert_eq!(refused[2]["data"]["narrowed"], true);
    assert_eq!(refused[2]["data"]["escalate_to"], "replan_milestone");
    // The failed call ran once; the refused retry did not run; the L2 list did.
    assert_eq!(stack.sim.stats().tools["lookup_rate"].calls, 2);
    let (_, plans) = stack.get(&format!("/v1/tasks/{id}/plans")).await;
    assert_eq!(plan_reasons(&plans), ["initial", "replan_milestone"]);
    stack.stop().await;
}

#[tokio::test]
async fn an_l3_identical_to_the_failed_plan_is_asked_again_then_stops_and_names_the_failed_dependency()
 {
    let stack = Stack::start("repeated_strategy.json").await;
    let id = stack
        .submit("Probe the service, then note it", "v2", 100_000)
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "failed", "{task:#}");
    let reason = task["result"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("repeats a failed plan"), "{task:#}");
    let events = stack.events(&id).await;
    let taken = repairs(&events, "m1");
    let levels: Vec<&str> = taken
        .iter()
        .map(|r| r["level"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        levels,
        ["retry_step", "replan_milestone", "replan_strategy"],
        "{taken:#?}"
    );
    // The L3 is a dependency_failed trigger naming the failed milestone and the blocked one.
    let l3 = &taken[2];
    assert_eq!(l3["reason"], "dependency_failed", "{l3}");
    assert_eq!(l3["class"], "impossible");
    assert_eq!(l3["dependency"], "m1");
    assert_eq!(l3["blocked"], serde_json::json!(["m2"]));
    assert!(
        l3["detail"]
            .as_str()
            .is_some_and(|d| d.contains("m2 blocked: dependency m1 failed")),
        "{l3}"
    );
    let blocked = of_kind(&events, "milestone.blocked");
    assert_eq!(blocked.len(), 1);
    assert_eq!(blocked[0]["data"]["milestone"], "m2");
    assert_eq!(blocked[0]["data"]["dependency"], "m1");
    assert_eq!(blocked[0]["data"]["reason"], "dependency_failed");
    // L1 and L2 repeated the failed list and were refused (a declared artifact never produced
    // is a fact, not a suspect check); the repeated plan was asked once more with the repeat
    // stated, and refused when it came back the same.
    assert_eq!(of_kind(&events, "milestone.steps_refused").len(), 2);
    let refused = of_kind(&events, "plan.refused");
    assert_eq!(refused.len(), 2, "{refused:#?}");
    for r in &refused {
        assert!(
            r["data"]["errors"]
                .as_str()
                .is_some_and(|e| e.contains("fingerprint")),
            "{refused:#?}"
        );
    }
    let stats = stack.sim.stats();
    assert_eq!(stats.tools["probe"].calls, 1, "the failed list ran once");
    assert_eq!(stats.llm.by_purpose.get("strategic"), Some(&3));
    let (_, plans) = stack.get(&format!("/v1/tasks/{id}/plans")).await;
    assert_eq!(
        plan_reasons(&plans),
        ["initial"],
        "the repeated plan was never installed"
    );
    let (_, stats) = stack.get("/v1/stats").await;
    assert_eq!(
        stats["plan_validity_rate"], 1.0,
        "a repeated plan is valid, only refused: {stats}"
    );
    stack.stop().await;
}

#[tokio::test]
async fn a_constraint_in_a_tool_answer_raises_new_constraint_and_replans_once() {
    let stack = Stack::start("new_constraint.json").await;
    let id = stack
        .submit("Fetch the prices and note them", "v2", 100_000)
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let events = stack.events(&id).await;
    let raised = of_kind(&events, "plan.constraint_raised");
    assert_eq!(raised.len(), 1, "{raised:#?}");
    let data = &raised[0]["data"];
    assert_eq!(data["text"], "prices must be quoted in EUR");
    assert_eq!(data["milestone"], "m1");
    assert_eq!(data["source"]["kind"], "tool");
    assert_eq!(data["source"]["tool"], "fetch_prices");
    let taken = repairs(&events, "m1");
    assert_eq!(taken.len(), 1, "{taken:#?}");
    assert_eq!(taken[0]["level"], "replan_strategy");
    assert_eq!(taken[0]["reason"], "new_constraint");
    assert_eq!(taken[0]["caused_by_seq"], raised[0]["seq"]);
    let (_, plans) = stack.get(&format!("/v1/tasks/{id}/plans")).await;
    assert_eq!(plan_reasons(&plans), ["initial", "new_constraint"]);
    let stats = stack.sim.stats();
    assert_eq!(stats.tools["fetch_prices"].calls, 2);
    assert_eq!(stats.tools["write_note"].calls, 1);
    stack.stop().await;
}
