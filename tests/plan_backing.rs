//! What the engine can stand behind, through the HTTP API against the simulator's scenario
//! files: a check naming an artifact no granted tool declares becomes `steps_succeeded`, a
//! milestone granted no tool is folded away (both recorded on `plan.accepted`), and a later
//! milestone is shown its dependencies' calls with their arguments, so a value comes with the
//! call that returned it, and inside a milestone a step that names a value its planner was not
//! shown waits until the output before it has been shown.
// Test code: a failed set-up is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod engine_stack;

use engine_stack::Stack;
use serde_json::{Value, json};

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["kind"] == kind).collect()
}

/// Tools that declare nothing, a check on an artifact named by the planner, and a tool-less
/// "summary" milestone: before, the plan was refused at every re-ask (no tools) and, had it
/// run, m1's check could never pass. Now the plan is accepted as amended and the task ends
/// verified.
#[tokio::test]
async fn an_unbacked_check_and_a_toolless_milestone_are_amended_not_refused() {
    let stack = Stack::start("checks_backed.json").await;
    let id = stack
        .submit("Find the user id of dana and summarise it", "v2", 50_000)
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    assert_eq!(task["result"]["verified"], true, "{task:#}");
    let events = stack.events(&id).await;
    assert!(of_kind(&events, "plan.refused").is_empty(), "{events:#?}");
    let accepted = of_kind(&events, "plan.accepted");
    assert_eq!(accepted.len(), 1, "{events:#?}");
    assert_eq!(
        accepted[0]["data"]["amended"],
        json!([
            {"kind": "folded", "milestone": "m2", "title": "Summary of the user id"},
            {"kind": "check_backed", "milestone": "m1",
             "replaced": {"type": "artifact", "name": "user_id", "non_empty": true}},
        ]),
        "{:#}",
        accepted[0]
    );
    let (_, plan) = stack.get(&format!("/v1/tasks/{id}/plans/1")).await;
    let milestones = plan["plan"]["milestones"].as_array().expect("milestones");
    assert_eq!(milestones.len(), 1, "{plan:#}");
    assert_eq!(milestones[0]["accept"], json!({"type": "steps_succeeded"}));
    let decided = of_kind(&events, "monitor.decided");
    assert_eq!(decided[0]["data"]["decision"], "passed", "{decided:#?}");
    assert_eq!(
        decided[0]["data"]["external"],
        json!([{"leaf": 0, "steps": "succeeded"}])
    );
    stack.stop().await;
}

/// m1 looks up the owners of A and B (each call's `owner` artifact overwrites the last);
/// m2 must write to A's owner. The scripted model answers right only when its input shows
/// A's owner: m1's merged artifacts do not, its calls with their arguments do.
#[tokio::test]
async fn a_later_milestone_sees_which_call_returned_which_value() {
    let stack = Stack::start("dependency_results.json").await;
    let id = stack
        .submit(
            "Look up who owns services A and B, then write a note to the owner of service A",
            "v2",
            50_000,
        )
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let events = stack.events(&id).await;
    let m2: Vec<&Value> = of_kind(&events, "milestone.steps_planned")
        .into_iter()
        .filter(|e| e["data"]["milestone"] == "m2")
        .collect();
    assert_eq!(m2.len(), 1, "{events:#?}");
    assert_eq!(
        m2[0]["data"]["steps"][0]["args"]["to"], "Priya Raman",
        "the note was meant for the owner of B: {:#}",
        m2[0]
    );
    let written = of_kind(&events, "step.finished")
        .into_iter()
        .filter(|e| e["data"]["tool"] == "write_note" && e["data"]["ok"] == true)
        .count();
    assert_eq!(written, 1, "{events:#?}");
    stack.stop().await;
}

/// Inside one milestone: the planner writes "list the orders, refund the latest" at once and
/// guesses the order id. The refund names a value the planner was not shown, so once the list
/// has run the rest is asked for again with its output in view; the scripted model answers
/// with the listed order only when the input shows it. The guessed refund is never sent, the
/// list call the continuation repeats is cut as done, and the right refund is sent once.
#[tokio::test]
async fn a_step_waits_for_the_output_it_needs_inside_a_milestone() {
    let stack = Stack::start("carry_within_milestone.json").await;
    let id = stack
        .submit(
            "Find the latest order of customer C-1042, refund it and report the refund id",
            "v2",
            50_000,
        )
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let events = stack.events(&id).await;
    let planned = of_kind(&events, "milestone.steps_planned");
    assert_eq!(planned.len(), 2, "{planned:#?}");
    assert_eq!(planned[0]["data"]["unshown_values_in"], json!(["s2"]));
    assert_eq!(planned[1]["data"]["continued"], true, "{:#}", planned[1]);
    assert_eq!(
        planned[1]["data"]["steps"],
        json!([{"id": "s2", "tool": "refund_order", "args": {"order": "ord-7m3q1"},
                "expected_output": "the refund id", "status": "pending", "attempt": 0}]),
        "the repeated list call is cut: {:#}",
        planned[1]
    );
    let sent: Vec<&Value> = of_kind(&events, "step.finished")
        .into_iter()
        .map(|e| &e["data"])
        .collect();
    let tools: Vec<&Value> = sent.iter().map(|d| &d["tool"]).collect();
    assert_eq!(
        tools,
        [&json!("list_orders"), &json!("refund_order")],
        "{sent:#?}"
    );
    let stats = stack.sim.stats();
    assert_eq!(stats.tools["refund_order"].calls, 1, "{stats:?}");
    assert_eq!(stats.tools["list_orders"].calls, 1, "{stats:?}");
    assert_eq!(sent[1]["args"]["order"], "ord-7m3q1", "{sent:#?}");
    stack.stop().await;
}

/// A tool named among a milestone's dependencies (as the 1.5B model wrote for a paging task)
/// becomes one of its tools: the plan is amended, not refused.
#[tokio::test]
async fn a_tool_named_as_a_dependency_becomes_the_milestones_tool() {
    let stack = Stack::start("tool_as_dependency.json").await;
    let id = stack
        .submit("Who is on call for the payments team?", "v2", 50_000)
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let events = stack.events(&id).await;
    assert!(of_kind(&events, "plan.refused").is_empty(), "{events:#?}");
    let accepted = of_kind(&events, "plan.accepted");
    assert_eq!(
        accepted[0]["data"]["amended"],
        json!([{"kind": "dependency_tool", "milestone": "m1", "tool": "get_oncall"}]),
        "{:#}",
        accepted[0]
    );
    let (_, plan) = stack.get(&format!("/v1/tasks/{id}/plans/1")).await;
    let m1 = &plan["plan"]["milestones"][0];
    assert_eq!(m1["tools"], json!(["get_oncall"]), "{plan:#}");
    assert_eq!(m1["depends_on"], json!([]), "{plan:#}");
    stack.stop().await;
}
