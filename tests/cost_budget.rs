//! Money as a budget unit and calls reserved before they are sent, through the HTTP API: the
//! worked example's scenario (`worked_example.json`) served through a proxy that rewrites what
//! the model provider reports, the way a real provider could answer. Whatever the provider does
//! (answer every call at its `max_tokens`, cut its first answer off with invalid JSON so the
//! client asks again, or report eight times the answer tokens it was asked for), the usage the proxy
//! actually returned for a task never exceeds the task's budget in tokens or money, the books
//! hold exactly that usage, and a task the budget cannot carry ends `budget_exhausted` with its
//! report. Both backends.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod engine_stack;

use std::sync::{Arc, Mutex};

use engine_stack::proxy::{Provider, Returned, via};
use engine_stack::{PRICE, Stack, TOOL_PRICE, priced};
use serde_json::{Value, json};

const GOAL: &str = "Rename config key db.url to db.dsn in services A, B and C";

/// Submits the worked example with `budget` and waits for its end.
async fn run(stack: &Stack, budget: Value) -> Value {
    let (status, body) = stack
        .post_task(&json!({"goal": GOAL, "strategy": "auto", "budget": budget}))
        .await;
    assert_eq!(status, 202, "{body:#}");
    let id = body["id"].as_str().expect("id").to_string();
    stack.finished(&id).await
}

/// Sum of the ledger's charges in `unit`.
async fn booked(stack: &Stack, id: &str, unit: &str) -> u64 {
    let (_, ledger) = stack.get(&format!("/v1/tasks/{id}/ledger")).await;
    ledger["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["kind"] == "charge" && e["unit"] == unit)
        .map(|e| e["amount"].as_u64().unwrap())
        .sum()
}

/// The tokens and money the provider's returned usage comes to for `id` (tool calls priced
/// from the books, which count them).
fn returned_of(returned: &Mutex<Returned>, id: &str) -> (u64, u64, usize) {
    let returned = returned.lock().unwrap();
    let calls = returned.by_task.get(id).cloned().unwrap_or_default();
    let tokens = calls.iter().map(|(p, c)| p + c).sum();
    let money = calls.iter().map(|(p, c)| PRICE.of(*p, *c)).sum();
    (tokens, money, calls.len())
}

/// The invariants every provider must leave: the books hold exactly what was returned, within
/// the budget in every unit, and a task that ran out ended `budget_exhausted` with its report.
async fn within_budget(stack: &Stack, returned: &Mutex<Returned>, task: &Value) -> (u64, u64) {
    let id = task["id"].as_str().expect("id");
    let (tokens, model_money, calls) = returned_of(returned, id);
    assert!(calls > 0, "the model was asked");
    let tool_calls = booked(stack, id, "tool_calls").await;
    let budget = &task["budget"];
    assert_eq!(booked(stack, id, "tokens").await, tokens, "{task:#}");
    assert!(
        tokens <= budget["tokens"].as_u64().unwrap(),
        "{tokens} tokens returned over the budget: {task:#}"
    );
    let money = booked(stack, id, "cost").await;
    assert!(money >= model_money, "every call priced");
    assert!(money <= model_money + tool_calls * TOOL_PRICE);
    if let Some(cap) = budget["cost"].as_u64() {
        assert!(money <= cap, "{money} spent over the {cap} cap: {task:#}");
    }
    assert_eq!(task["result"]["spend"]["tokens"].as_u64(), Some(tokens));
    assert_eq!(task["result"]["spend"]["cost"].as_u64(), Some(money));
    (tokens, money)
}

async fn exhausted(stack: &Stack, task: &Value) {
    assert_eq!(task["status"], "budget_exhausted", "{task:#}");
    let result = &task["result"];
    assert!(result["reason"].as_str().is_some(), "{result:#}");
    assert!(
        result["milestones"].is_array(),
        "the report lists the milestones"
    );
    let id = task["id"].as_str().expect("id");
    let limited = stack.events_of(id, "ledger.limited").await;
    assert!(!limited.is_empty(), "a call was cut or refused");
}

async fn provider_case(provider: Provider, postgres: bool, budget: Value) {
    let returned = Arc::new(Mutex::new(Returned::default()));
    let stack = Stack::start_via(
        "worked_example.json",
        postgres,
        priced(),
        via(provider, returned.clone()),
    )
    .await;
    let task = run(&stack, budget).await;
    within_budget(&stack, &returned, &task).await;
    exhausted(&stack, &task).await;
    stack.stop().await;
}

fn tokens(tokens: u64) -> Value {
    json!({"tokens": tokens, "tool_calls": 100, "wall_ms": 600_000})
}

/// A money cap, with tokens enough that money runs out first.
fn money(cap: u64) -> Value {
    json!({"tokens": 1_000_000, "tool_calls": 100, "wall_ms": 600_000, "cost": cap})
}

#[tokio::test]
async fn answers_at_max_tokens_stay_within_the_token_budget() {
    provider_case(Provider::AtLimit, false, tokens(30_000)).await;
}

#[tokio::test]
async fn answers_at_max_tokens_stay_within_the_token_budget_on_postgres() {
    provider_case(Provider::AtLimit, true, tokens(30_000)).await;
}

#[tokio::test]
async fn cut_off_answers_asked_again_stay_within_the_token_budget() {
    provider_case(Provider::CutOffFirst, false, tokens(30_000)).await;
}

#[tokio::test]
async fn cut_off_answers_asked_again_stay_within_the_token_budget_on_postgres() {
    provider_case(Provider::CutOffFirst, true, tokens(30_000)).await;
}

#[tokio::test]
async fn a_provider_reporting_more_than_asked_stays_within_the_money_cap() {
    provider_case(Provider::OverReports, false, money(60_000)).await;
}

#[tokio::test]
async fn a_provider_reporting_more_than_asked_stays_within_the_money_cap_on_postgres() {
    provider_case(Provider::OverReports, true, money(60_000)).await;
}

#[tokio::test]
async fn without_a_money_cap_the_spend_is_still_counted_and_the_task_runs_as_before() {
    let returned = Arc::new(Mutex::new(Returned::default()));
    let stack = Stack::start_via(
        "worked_example.json",
        false,
        priced(),
        via(Provider::AtLimit, returned.clone()),
    )
    .await;
    let task = run(&stack, tokens(200_000)).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    assert!(task["budget"].get("cost").is_none(), "no cap was asked");
    let (_, money) = within_budget(&stack, &returned, &task).await;
    assert!(money > 0);
    let (_, ledger) = stack
        .get(&format!(
            "/v1/tasks/{}/ledger",
            task["id"].as_str().unwrap()
        ))
        .await;
    let cost = &ledger["units"]["cost"];
    assert_eq!(cost["spent"].as_u64(), Some(money), "{ledger:#}");
    assert_eq!(
        cost["initial_reserve"], 0,
        "nothing allocated to an uncapped unit"
    );
    stack.stop().await;
}

#[tokio::test]
async fn a_money_cap_out_of_range_is_refused_in_plain_words() {
    let stack = Stack::start("worked_example.json").await;
    for cost in [json!(0), json!(-5), json!(1.5), json!("ten")] {
        let (status, body) = stack
            .post_task(&json!({"goal": GOAL, "budget": {"cost": cost}}))
            .await;
        assert_eq!(status, 422, "{cost}: {body:#}");
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("budget.cost"), "{detail}");
    }
    let (_, tasks) = stack.get("/v1/tasks").await;
    assert_eq!(
        tasks["items"].as_array().map(Vec::len),
        Some(0),
        "nothing written"
    );
    stack.stop().await;
}

/// The worked example with a price table: the seed's token figures unchanged (152,200 tokens:
/// docs/scenarios.md), and the cost column beside them: 1 micro-unit per prompt token and 4 per
/// answer token come to 182,500 for the nine model calls (prompt 142,100, answers 10,100), and
/// each tool call the simulator was sent adds 100 (an edit answered from its receipt is not sent
/// and costs nothing).
#[tokio::test]
async fn the_worked_example_reproduces_its_tokens_with_a_cost_column() {
    let stack = Stack::start_with("worked_example.json", priced()).await;
    let task = run(&stack, tokens(200_000)).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let spend = &task["result"]["spend"];
    assert_eq!(spend["tokens"], 152_200, "{spend}");
    let sent: u64 = stack.sim.stats().tools.values().map(|t| t.calls).sum();
    assert_eq!(spend["cost"].as_u64(), Some(182_500 + TOOL_PRICE * sent));
    let id = task["id"].as_str().unwrap();
    let (_, ledger) = stack.get(&format!("/v1/tasks/{id}/ledger")).await;
    let spent = |unit: &str, m: &str| ledger["units"][unit]["milestones"][m]["spent"].as_u64();
    // Per milestone: m1 11,400; m2 and m3 52,000; m4's three step lists 63,100; plus tools.
    for (m, model) in [
        ("m1", 11_400),
        ("m2", 52_000),
        ("m3", 52_000),
        ("m4", 63_100),
    ] {
        let cost = spent("cost", m).unwrap();
        assert!(
            cost >= model && (cost - model) % TOOL_PRICE == 0,
            "{m}: {cost}"
        );
    }
    assert_eq!(spent("tokens", "m4"), Some(52_000));
    // Overhead: the gate 450, the plan 3,000, the verifier 550.
    assert_eq!(ledger["units"]["cost"]["overhead"], 4_000, "{ledger:#}");
    stack.stop().await;
}

/// A money cap needs every model and tool priced: with `run` unpriced, a task asking for one is
/// refused in plain words and nothing is written; without one it is accepted and `run` counted
/// at nothing.
#[tokio::test]
async fn a_money_cap_is_refused_while_a_tool_is_unpriced() {
    let mut settings = priced();
    settings.prices.tools.remove("run");
    let stack = Stack::start_with("worked_example.json", settings).await;
    let capped = json!({"goal": GOAL, "budget": {"cost": 1_000_000}});
    let (status, body) = stack.post_task(&capped).await;
    assert_eq!(status, 422, "{body:#}");
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("budget.cost") && detail.contains("\"run\""),
        "{detail}"
    );
    let (_, tasks) = stack.get("/v1/tasks").await;
    assert_eq!(
        tasks["items"].as_array().map(Vec::len),
        Some(0),
        "nothing written"
    );
    let (status, body) = stack.post_task(&json!({"goal": GOAL})).await;
    assert_eq!(status, 202, "{body:#}");
    stack.stop().await;
}

#[tokio::test]
async fn a_provider_reporting_no_usage_is_booked_as_marked_estimates() {
    let returned = Arc::new(Mutex::new(Returned::default()));
    let stack = Stack::start_via(
        "worked_example.json",
        false,
        priced(),
        via(Provider::NoUsage, returned.clone()),
    )
    .await;
    let task = run(&stack, tokens(400_000)).await;
    let id = task["id"].as_str().expect("id");
    let (_, _, calls) = returned_of(&returned, id);
    let marked = stack.events_of(id, "ledger.estimated").await;
    assert_eq!(marked.len(), calls, "every model call marked: {marked:#?}");
    // Every token is an estimate; of the money, all but the tool calls' prices.
    let estimated = &task["result"]["spend_estimated"];
    assert_eq!(estimated["calls"].as_u64(), Some(calls as u64), "{task:#}");
    let tokens_booked = booked(&stack, id, "tokens").await;
    assert!(tokens_booked > 0, "an estimate is never free");
    assert_eq!(
        estimated["tokens"].as_u64(),
        Some(tokens_booked),
        "{task:#}"
    );
    let marked_cost: u64 = marked.iter().map(|e| e["cost"].as_u64().unwrap()).sum();
    assert_eq!(estimated["cost"].as_u64(), Some(marked_cost));
    let money = booked(&stack, id, "cost").await;
    let tool_money = booked(&stack, id, "tool_calls").await * TOOL_PRICE;
    assert!(marked_cost <= money && money <= marked_cost + tool_money);
    let (_, ledger) = stack.get(&format!("/v1/tasks/{id}/ledger")).await;
    assert_eq!(&ledger["estimated"], estimated, "{ledger:#}");
    let (_, stats) = stack.get("/v1/stats").await;
    let today = &stats["spend"]["periods"][0];
    assert_eq!(today["cost"].as_u64(), Some(money), "{stats:#}");
    assert_eq!(today["estimated"], estimated["cost"]);
    stack.stop().await;
}
