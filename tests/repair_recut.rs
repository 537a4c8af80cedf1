//! Repairs that change the question when the model answers with what already failed, through
//! the HTTP API against scenario files: a repeated step list is cut to what it still asks (the
//! call that failed is not sent again, the calls made are kept as done), a correct list written
//! again after a check failed on steps that all succeeded is judged by the engine's own check,
//! and an L3 plan that plans the failed milestone again is asked once more without the tool
//! that failed there.
// Test code: a failed set-up is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod engine_stack;

use engine_stack::{Stack, plan_reasons};
use serde_json::{Value, json};

#[tokio::test]
async fn a_repeated_list_is_cut_to_what_it_still_asks_on_sqlite() {
    cut(Stack::start("repeated_call_cut.json").await).await;
}

#[tokio::test]
async fn a_repeated_list_is_cut_to_what_it_still_asks_on_postgres() {
    cut(Stack::start_pg("repeated_call_cut.json").await).await;
}

async fn cut(stack: Stack) {
    let goal = "Find the leader pod of the search cluster, capture a heap dump from it and tell \
                me the dump id.";
    let id = stack.submit(goal, "v2", 100_000).await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let planned = stack.events_of(&id, "milestone.steps_planned").await;
    let recut: Vec<&Value> = planned
        .iter()
        .filter(|p| p.get("recut").is_some())
        .collect();
    assert_eq!(recut.len(), 1, "{planned:#?}");
    let recut = recut[0];
    assert_eq!(recut["milestone"], "m1");
    assert_eq!(recut["level"], "retry_step");
    // The failed call is named as cut; the list kept is the leader lookup, already done.
    assert_eq!(
        recut["recut"]["cut_failed"],
        json!([{"tool": "find_pod", "args": {"cluster": "search", "role": "worker"}}]),
        "{recut:#}"
    );
    assert_eq!(recut["recut"]["engine_check"], false);
    let kept: Vec<&str> = recut["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["args"]["role"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(kept, ["leader"], "{recut:#}");
    // Neither lookup was sent again, and the dump came from the pod found.
    assert_eq!(stack.tool_calls("find_pod"), 2, "leader once, worker once");
    assert_eq!(stack.tool_calls("heap_dump"), 1);
    let (_, plans) = stack.get(&format!("/v1/tasks/{id}/plans")).await;
    assert_eq!(plan_reasons(&plans), ["initial", "retry_step"], "{plans:#}");
    stack.stop().await;
}

#[tokio::test]
async fn a_correct_list_written_again_after_its_check_failed_is_judged_by_the_engines_check() {
    let stack = Stack::start("check_suspect.json").await;
    let goal = "Upload the parquet export sales-S17-03.parquet to the warehouse.";
    let id = stack.submit(goal, "v2", 100_000).await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let decided = stack.events_of(&id, "monitor.decided").await;
    let decisions: Vec<(&str, bool)> = decided
        .iter()
        .map(|d| {
            let engine = d["engine_check"] == true;
            (d["decision"].as_str().unwrap_or_default(), engine)
        })
        .collect();
    // The planner's verifier leaf failed on right steps; the repair found nothing missing, so
    // the engine's check (steps succeeded, the change made) judged it, once.
    assert_eq!(
        decisions,
        [("failing", false), ("passed", true)],
        "{decided:#?}"
    );
    assert_eq!(decided[1]["check"], "steps_succeeded");
    let planned = stack.events_of(&id, "milestone.steps_planned").await;
    let recut = planned.iter().find(|p| p.get("recut").is_some()).unwrap();
    assert_eq!(recut["recut"]["engine_check"], true, "{recut:#}");
    assert_eq!(recut["recut"]["cut_failed"], json!([]));
    let refused = stack.events_of(&id, "milestone.steps_refused").await;
    assert!(
        refused.is_empty(),
        "the correct list was not refused: {refused:#?}"
    );
    assert_eq!(
        stack.tool_calls("upload_file"),
        1,
        "the upload was not sent again"
    );
    stack.stop().await;
}

#[tokio::test]
async fn an_l3_plan_repeating_the_failed_milestone_is_asked_again_without_its_failed_tool() {
    let stack = Stack::start("l3_repeat_reasked.json").await;
    let goal = "Create a shipment of order ord-2w8n5 from warehouse WH-3.";
    let id = stack.submit(goal, "v2", 100_000).await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let refused = stack.events_of(&id, "plan.refused").await;
    assert_eq!(refused.len(), 1, "{refused:#?}");
    let errors = refused[0]["errors"].as_str().unwrap_or_default();
    assert!(
        errors.contains("milestone m1 plans the failed milestone m1 again"),
        "{errors}"
    );
    assert!(
        errors.contains("not found"),
        "the failure is stated: {errors}"
    );
    assert!(
        errors.contains("Not offered now (failed there, never succeeded): get_order"),
        "{errors}"
    );
    let (_, plans) = stack.get(&format!("/v1/tasks/{id}/plans")).await;
    assert_eq!(
        plan_reasons(&plans),
        ["initial", "replan_strategy"],
        "{plans:#}"
    );
    let (_, latest) = stack.get(&format!("/v1/tasks/{id}/plans/2")).await;
    let tools: Vec<&Value> = latest["plan"]["milestones"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["tools"].as_array().unwrap())
        .collect();
    assert_eq!(tools, [&json!("create_shipment")], "{latest:#}");
    assert_eq!(stack.tool_calls("get_order"), 1, "the failed read ran once");
    assert_eq!(stack.tool_calls("create_shipment"), 1);
    let strategic = stack.sim.stats().llm.by_purpose.get("strategic").copied();
    assert_eq!(strategic, Some(3), "first plan, the repeat, the re-ask");
    stack.stop().await;
}

#[tokio::test]
async fn a_failed_step_a_repair_replaced_is_followed_up_before_the_check() {
    let stack = Stack::start("follow_up_failed.json").await;
    let goal = "Read the deploy key id from config/gateway.yaml and revoke that key.";
    let id = stack.submit(goal, "v2", 100_000).await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let planned = stack.events_of(&id, "milestone.steps_planned").await;
    let m1: Vec<(&str, bool)> = planned
        .iter()
        .filter(|p| p["milestone"] == "m1")
        .map(|p| {
            let tool = p["steps"][0]["tool"].as_str().unwrap_or_default();
            (tool, p["continued"] == true)
        })
        .collect();
    // The read, the repair's locate alone, then the follow-up's read (a continuation).
    assert_eq!(
        m1,
        [("read_file", false), ("locate", false), ("read_file", true)],
        "{planned:#?}"
    );
    assert_eq!(stack.tool_calls("read_file"), 2);
    assert_eq!(stack.tool_calls("locate"), 1);
    assert_eq!(
        stack.tool_calls("revoke_key"),
        1,
        "the key read was revoked"
    );
    stack.stop().await;
}

#[tokio::test]
async fn no_follow_up_after_a_list_that_made_a_change() {
    let stack = Stack::start("follow_up_after_change.json").await;
    let goal = "Snapshot database orders-db, copy the snapshot to the cold-archive bucket and \
                report the backup id.";
    let id = stack.submit(goal, "v2", 100_000).await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let planned = stack.events_of(&id, "milestone.steps_planned").await;
    let continued = planned.iter().filter(|p| p["continued"] == true).count();
    assert_eq!(continued, 0, "{planned:#?}");
    assert_eq!(
        stack.tool_calls("list_snapshots"),
        1,
        "the failed listing ran once"
    );
    assert_eq!(stack.tool_calls("copy_snapshot"), 1);
    stack.stop().await;
}

#[tokio::test]
async fn a_failed_plan_for_a_knowledge_question_is_handed_to_the_direct_route() {
    let stack = Stack::start("knowledge_handover.json").await;
    let id = stack
        .submit("What is the capital of Australia?", "v2", 100_000)
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    assert_eq!(task["result"]["verified"], true, "{task:#}");
    assert_eq!(task["result"]["extra"]["answer"], "Canberra", "{task:#}");
    let declined = stack.events_of(&id, "plan.declined").await;
    assert_eq!(declined.len(), 1, "{declined:#?}");
    assert_eq!(declined[0]["handed_over"], true, "{declined:#?}");
    assert_eq!(declined[0]["failed_milestone"], "m1", "{declined:#?}");
    // The plan that failed stays on record; no new strategy was asked for.
    let (_, plans) = stack.get(&format!("/v1/tasks/{id}/plans")).await;
    assert_eq!(plan_reasons(&plans), ["initial"], "{plans:#}");
    let strategic = stack.sim.stats().llm.by_purpose.get("strategic").copied();
    assert_eq!(strategic, Some(1), "the first plan only");
    assert!(stack.tool_calls("get_service") >= 1);
    // The failed milestone's unspent allocation went back to the reserve that pays the loop.
    let returned = stack.events_of(&id, "ledger.return").await;
    assert!(
        returned.iter().any(|r| r["source"] == "plan_handed_over"
            && r["movements"]
                .as_array()
                .is_some_and(|m| m.iter().any(|m| m["milestone"] == "m1"))),
        "{returned:#?}"
    );
    let rounds = stack.events_of(&id, "direct.round").await;
    assert!(!rounds.is_empty(), "the act loop answered");
    assert_eq!(
        stack.tool_calls("search"),
        1,
        "the answer has a call behind it"
    );
    stack.stop().await;
}

#[tokio::test]
async fn a_handed_over_answer_with_no_call_behind_it_is_not_claimed() {
    let stack = Stack::start("knowledge_handover.json").await;
    // The same scenario, but the loop's first round answers at once: the plan said a tool was
    // needed, so an answer with no successful call behind it is not verified.
    let id = stack
        .submit(
            "What is the capital of Australia? Answer at once.",
            "v2",
            100_000,
        )
        .await;
    let task = stack.finished(&id).await;
    let declined = stack.events_of(&id, "plan.declined").await;
    assert_eq!(declined.len(), 1, "{declined:#?}");
    assert_eq!(task["status"], "failed", "{task:#}");
    assert_eq!(task["result"]["verified"], false, "{task:#}");
    assert!(
        task["result"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("no evidence")),
        "{task:#}"
    );
    stack.stop().await;
}

#[tokio::test]
async fn a_change_another_milestone_made_is_adopted_not_made_again() {
    let stack = Stack::start("changes_made.json").await;
    let goal = "Ship order ord-2w8n5 from warehouse WH-3 and email its tracking number trk-60x7a \
                to ana@example.com.";
    let id = stack.submit(goal, "v2", 100_000).await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    assert_eq!(stack.tool_calls("send_email"), 1, "one email, not two");
    assert_eq!(stack.tool_calls("create_shipment"), 1);
    let planned = stack.events_of(&id, "milestone.steps_planned").await;
    let m3: Vec<&Value> = planned.iter().filter(|p| p["milestone"] == "m3").collect();
    assert_eq!(m3.len(), 1, "{planned:#?}");
    assert_eq!(
        m3[0]["adopted"],
        json!([{"milestone": "m1", "step": "s2", "tool": "send_email"}]),
        "{m3:#?}"
    );
    assert_eq!(m3[0]["steps"][0]["tool"], "send_email", "{m3:#?}");
    assert_eq!(m3[0]["steps"][0]["status"], "done", "{m3:#?}");
    // m2's read has no change of its own tools to adopt: its first list is its own.
    let m2: Vec<&Value> = planned.iter().filter(|p| p["milestone"] == "m2").collect();
    assert!(m2.iter().all(|p| p.get("adopted").is_none()), "{m2:#?}");
    let decided = stack.events_of(&id, "monitor.decided").await;
    assert!(
        decided
            .iter()
            .any(|d| d["milestone"] == "m3" && d["decision"] == "passed"),
        "{decided:#?}"
    );
    stack.stop().await;
}

#[tokio::test]
async fn an_l3_re_ask_still_offers_the_change_the_goal_names() {
    let stack = Stack::start("l3_keeps_wanted_tools.json").await;
    let goal = "Find the user id of sam@example.com and add that user to team data.";
    let id = stack.submit(goal, "v2", 100_000).await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let refused = stack.events_of(&id, "plan.refused").await;
    assert_eq!(refused.len(), 1, "{refused:#?}");
    let errors = refused[0]["errors"].as_str().unwrap_or_default();
    assert!(
        errors.contains("plans the failed milestone m2 again"),
        "{errors}"
    );
    assert!(
        !errors.contains("Not offered now"),
        "add_to_team is the change the goal asks for: {errors}"
    );
    let (_, latest) = stack.get(&format!("/v1/tasks/{id}/plans/2")).await;
    assert_eq!(
        latest["plan"]["milestones"][1]["tools"],
        json!(["add_to_team"])
    );
    stack.stop().await;
}

#[tokio::test]
async fn a_milestone_whose_tool_asked_to_be_called_again_may_be_planned_again() {
    let stack = Stack::start("l3_asked_again.json").await;
    let goal = "Find the newest feature branch of repo shop and open a pull request from it.";
    let id = stack.submit(goal, "v2", 100_000).await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let refused = stack.events_of(&id, "plan.refused").await;
    assert!(refused.is_empty(), "not a repeat: {refused:#?}");
    let (_, plans) = stack.get(&format!("/v1/tasks/{id}/plans")).await;
    assert_eq!(
        plan_reasons(&plans),
        ["initial", "replan_strategy"],
        "{plans:#}"
    );
    let (_, latest) = stack.get(&format!("/v1/tasks/{id}/plans/2")).await;
    assert_eq!(
        latest["plan"]["milestones"][1]["tools"],
        json!(["create_pr"])
    );
    assert_eq!(stack.tool_calls("lookup_branch"), 1, "m1 stayed done");
    stack.stop().await;
}
