//! The gate's safety and the task's books, end to end through the HTTP API against the
//! in-process simulator (scenarios `gate_destructive.json` and `books_after_replan.json`):
//! a destructive goal is planned even when the gate model's features say direct and the goal
//! kind has a good direct record; and after an L3 replan the result's spend is the sum of the
//! ledger's charges, the dropped milestone and the pre-plan spend included, within the budget.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod engine_stack;

use cairn::domain::ledger::{Ledger, LedgerMovement, PerUnit, Unit};
use engine_stack::Stack;
use serde_json::Value;

const QUESTION: &str = "What is the size of database db-main?";
const DESTRUCTIVE: &str = "Delete the production database db-main and drop all its tables";

fn gate_decided(events: &[Value]) -> Value {
    events
        .iter()
        .find(|e| e["kind"] == "gate.decided")
        .map(|e| e["data"].clone())
        .expect("a gate.decided event")
}

#[tokio::test]
async fn a_destructive_goal_is_planned_though_the_gate_model_says_direct() {
    let stack = Stack::start("gate_destructive.json").await;
    // Give the kind `lookup` a good direct record: 8 read-only questions, strategy direct.
    for _ in 0..8 {
        let id = stack.submit(QUESTION, "direct", 50_000).await;
        let task = stack.finished(&id).await;
        assert_eq!(task["status"], "succeeded", "{task:#}");
    }
    let (_, gate) = stack.get("/v1/stats/gate").await;
    assert_eq!(gate["direct_success_by_kind"]["lookup"], 1.0, "{gate}");

    // Control: with that record, the model's features (one call, no writes) route a read
    // direct, and the heuristic agrees.
    let id = stack.submit(QUESTION, "auto", 50_000).await;
    let task = stack.finished(&id).await;
    assert_eq!(task["result"]["gate"]["route"], "direct", "{task:#}");

    // The same model answer for the destructive goal: planned.
    let id = stack.submit(DESTRUCTIVE, "auto", 50_000).await;
    let task = stack.finished(&id).await;
    assert_eq!(task["result"]["gate"]["route"], "plan", "{task:#}");
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let events = stack.events(&id).await;
    let decided = gate_decided(&events);
    assert_eq!(decided["route"], "plan");
    assert_eq!(decided["model"]["touches_writes"], false, "{decided:#}");
    assert_eq!(decided["model"]["est_tool_calls"], 1);
    assert_eq!(decided["heuristic"]["touches_writes"], true);
    assert!(
        decided["heuristic"]["targets"].as_u64() >= Some(2),
        "all its tables"
    );
    assert_eq!(decided["features"]["source"], "combined");
    assert_eq!(decided["features"]["touches_writes"], true);
    assert_eq!(decided["features"]["direct_history"]["successes"], 9);
    let rules: Vec<&str> = decided["reasons"]
        .as_array()
        .expect("reasons")
        .iter()
        .filter_map(|r| r["rule"].as_str())
        .collect();
    assert!(rules.contains(&"touches_writes"), "{rules:?}");
    assert!(events.iter().any(|e| e["kind"] == "plan.accepted"));
    // The result keeps the sources too, and the drop ran once, through the plan.
    assert_eq!(task["result"]["gate"]["model"]["touches_writes"], false);
    let stats = stack.sim.stats();
    assert_eq!(stats.tools["drop_database"].calls, 1);
    assert_eq!(stats.llm.by_purpose.get("strategic"), Some(&1));
    stack.stop().await;
}

/// Sum of the `charge` entries of a ledger view, per unit.
fn charged(ledger: &Value) -> PerUnit<i64> {
    let mut sum = PerUnit::default();
    for e in ledger["entries"].as_array().expect("entries") {
        if e["kind"] == "charge" {
            let unit = Unit::parse(e["unit"].as_str().unwrap()).unwrap();
            *sum.get_mut(unit) += e["amount"].as_i64().unwrap();
        }
    }
    sum
}

#[tokio::test]
async fn the_books_equal_the_ledger_after_an_l3_replan() {
    books_after_replan(Stack::start("books_after_replan.json").await).await;
}

#[tokio::test]
async fn the_books_equal_the_ledger_after_an_l3_replan_on_postgres() {
    books_after_replan(Stack::start_pg("books_after_replan.json").await).await;
}

async fn books_after_replan(stack: Stack) {
    let budget = 100_000;
    let id = stack
        .submit(
            "Rename config key db.url to db.dsn in service C",
            "auto",
            budget,
        )
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let result = &task["result"];
    let (_, plans) = stack.get(&format!("/v1/tasks/{id}/plans")).await;
    let reasons: Vec<&str> = plans["items"]
        .as_array()
        .expect("versions")
        .iter()
        .filter_map(|v| v["reason"].as_str())
        .collect();
    assert!(reasons.contains(&"replan_strategy"), "{reasons:?}");

    let (status, ledger) = stack.get(&format!("/v1/tasks/{id}/ledger")).await;
    assert_eq!(status, 200);
    // The result's spend is every charge on the books, per unit.
    let charged = charged(&ledger);
    for unit in Unit::ALL {
        assert_eq!(
            result["spend"][unit.as_str()].as_i64(),
            Some(*charged.get(unit)),
            "{}: {result:#}",
            unit.as_str()
        );
    }
    // The dropped milestone is on the result with its spend, as on the books.
    let milestones = result["milestones"].as_array().expect("milestones");
    let m2 = milestones
        .iter()
        .find(|m| m["id"] == "m2")
        .expect("the dropped m2 is reported");
    assert_eq!(m2["status"], "dropped");
    let m2_spent = ledger["units"]["tokens"]["milestones"]["m2"]["spent"].clone();
    assert!(m2_spent.as_i64() >= Some(5_000), "{ledger:#}");
    assert_eq!(m2["spend"]["tokens"], m2_spent);
    let per_milestone: i64 = milestones
        .iter()
        .map(|m| m["spend"]["tokens"].as_i64().unwrap())
        .sum();
    let overhead = ledger["units"]["tokens"]["overhead"].as_i64().unwrap();
    let events = stack.events(&id).await;
    // One ledger event per run of movements of one kind, each movement listed in it.
    let sources: Vec<(String, i64)> = events
        .iter()
        .filter(|e| e["kind"] == "ledger.charge")
        .flat_map(|e| {
            let source = e["data"]["source"].as_str().unwrap_or_default().to_string();
            e["data"]["movements"]
                .as_array()
                .expect("movements")
                .iter()
                .filter(|m| m["milestone"].is_null() && m["unit"] == "tokens")
                .map(move |m| (source.clone(), m["amount"].as_i64().unwrap()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        overhead,
        300 + 1_500 + 1_500 + 400,
        "gate, 2 plans, verifier: {sources:?}"
    );
    assert_eq!(per_milestone + overhead, *charged.get(Unit::Tokens));

    // Pre-plan spend (gate 300, strategic 1,500) is on the ledger before the allocation...
    let entries = ledger["entries"].as_array().expect("entries");
    // Every entry is listed, in order, in exactly one `ledger.<kind>` event, and movements of
    // one kind made together share one: the allocation of both milestones is a single event.
    let listed: Vec<Value> = events
        .iter()
        .filter_map(|e| Some((e["kind"].as_str()?.strip_prefix("ledger.")?, e)))
        .flat_map(|(kind, e)| {
            let movements = e["data"]["movements"].as_array().expect("movements");
            movements
                .iter()
                .map(|m| serde_json::json!([kind, m["milestone"], m["unit"], m["amount"]]))
                .collect::<Vec<_>>()
        })
        .collect();
    let stored: Vec<Value> = entries
        .iter()
        .map(|e| serde_json::json!([e["kind"], e["milestone_id"], e["unit"], e["amount"]]))
        .collect();
    assert_eq!(listed, stored);
    let allocations = events
        .iter()
        .filter(|e| e["kind"] == "ledger.allocate")
        .count();
    assert!(allocations < entries.iter().filter(|e| e["kind"] == "allocate").count());
    let first_allocate = entries
        .iter()
        .position(|e| e["kind"] == "allocate")
        .expect("an allocation");
    let pre_plan: Vec<i64> = entries[..first_allocate]
        .iter()
        .filter(|e| e["unit"] == "tokens")
        .map(|e| {
            assert_eq!(
                (e["kind"].as_str(), e["milestone_id"].as_str()),
                (Some("charge"), None)
            );
            e["amount"].as_i64().unwrap()
        })
        .collect();
    assert_eq!(pre_plan, [300, 1_500]);
    // ...the allocation is the policy's (20% reserve, 1:2 split of the rest)...
    let tokens = &ledger["units"]["tokens"];
    assert_eq!(tokens["initial_reserve"], 20_000);
    let initial = |m: &str| {
        let f = &tokens["milestones"][m];
        f["allocated"].as_i64().unwrap() + f["returned"].as_i64().unwrap()
            - f["granted"].as_i64().unwrap()
    };
    assert_eq!(initial("m1"), 26_666);
    // ...and the reserve paid for it: replayed from the entries alone, every token spent is
    // covered and within the budget.
    let movements: Vec<LedgerMovement> = entries
        .iter()
        .map(|e| {
            LedgerMovement::from_parts(
                e["milestone_id"].as_str().map(str::to_string),
                e["kind"].as_str().unwrap(),
                e["unit"].as_str().unwrap(),
                e["amount"].as_i64().unwrap(),
            )
            .unwrap()
        })
        .collect();
    let totals = PerUnit {
        tokens: budget,
        tool_calls: 100,
        wall_ms: 600_000,
        cost: 0,
    };
    let books = Ledger::replay(totals, &movements).expect("replays");
    for unit in Unit::ALL {
        let book = books.book(unit);
        assert!(book.conserved(), "{}", unit.as_str());
        assert_eq!(book.uncovered(), 0, "{}", unit.as_str());
        assert_eq!(
            book.overhead_drawn,
            book.overhead_spent,
            "{}",
            unit.as_str()
        );
        assert!(book.spent() <= book.total, "{}", unit.as_str());
    }
    stack.stop().await;
}

#[tokio::test]
async fn a_call_the_budget_cannot_cover_is_not_sent_and_the_task_stops_before_any_step() {
    // The worked example's gate (300) and strategic call (1,500) against 1,000 tokens. Calls are
    // reserved before they are sent (docs/architecture.md, "Money and reservations"): the first
    // call whose smallest answer and prompt cannot fit what is left is refused, not sent, so the
    // books never exceed the budget (before reservations the two calls were sent and 800 tokens
    // of them were left uncovered). The task ends budget_exhausted instead of running milestones.
    let stack = Stack::start("worked_example.json").await;
    let id = stack
        .submit(
            "Rename config key db.url to db.dsn in services A, B, C",
            "auto",
            1_000,
        )
        .await;
    let task = stack.finished(&id).await;
    assert_eq!(task["status"], "budget_exhausted", "{task:#}");
    let result = &task["result"];
    assert!(
        result["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("tokens"),
        "{result:#}"
    );
    let (_, ledger) = stack.get(&format!("/v1/tasks/{id}/ledger")).await;
    let spent = result["spend"]["tokens"].as_i64().expect("spend");
    assert!(spent <= 1_000, "within the budget: {result:#}");
    assert_eq!(charged(&ledger).tokens, spent, "the spend is on the books");
    let limited = stack.events_of(&id, "ledger.limited").await;
    let refused: Vec<&Value> = limited
        .iter()
        .filter(|l| l["refused"] == "tokens")
        .collect();
    assert_eq!(
        refused.len(),
        1,
        "one call refused, then the task stopped: {limited:#?}"
    );
    assert!(
        refused[0]["worst"]["tokens"].as_u64() > refused[0]["room"]["tokens"].as_u64(),
        "{refused:#?}"
    );
    assert_eq!(
        stack.sim.stats().llm.by_purpose.get("strategic"),
        None,
        "the plan was never asked for"
    );
    assert_eq!(stack.sim.stats().tools["search"].calls, 0);
    let events = stack.events(&id).await;
    assert_eq!(
        events.last().map(|e| e["kind"].clone()),
        Some("task.budget_exhausted".into())
    );
    stack.stop().await;
}
