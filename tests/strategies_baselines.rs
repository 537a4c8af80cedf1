//! The baseline strategies (one_shot, reactive, v1) against the scripted ports of the engine
//! tests, on a real SQLite store: each one's protocol, and local repair's central claim on the
//! worked example (docs/scenarios.md): v1 throws finished work away at the m4 failure, v2 keeps
//! it.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod engine_fakes;

use std::sync::Arc;

use cairn::domain::settings::EngineSettings;
use cairn::domain::task::{Strategy, TaskStatus};
use cairn::engine::baselines::{BaselineConfig, OneShotEngine, Ports, ReactiveEngine, V1Engine};
use cairn::engine::planner::V2Engine;
use cairn::engine::runtime::ports::Purpose;
use cairn::store::Store;
use engine_fakes::*;
use serde_json::json;

const WORKED_GOAL: &str = "Rename config key db.url to db.dsn in services A, B, C";

async fn store() -> (common::TestSqlite, Arc<dyn Store>) {
    common::sqlite_store().await
}

fn ports(model: &Arc<FakeModel>, tools: &Arc<FakeTools>) -> Ports {
    Ports {
        models: model.clone(),
        tools: tools.clone(),
        config: BaselineConfig::default(),
        validators: Default::default(),
        approval: Default::default(),
        prices: Default::default(),
        spend_caps: Default::default(),
    }
}

fn edit(path: &str) -> serde_json::Value {
    json!({"tool": "edit_file", "args": {"path": path, "find": "db.url", "replace": "db.dsn"}})
}

fn run(cwd: &str) -> serde_json::Value {
    json!({"tool": "run", "args": {"cmd": "make test", "cwd": cwd}})
}

#[tokio::test]
async fn v1_discards_progress_where_v2_keeps_it_on_the_worked_example() {
    // v1: the list written up front misses c/start.sh (as m1's search does in the worked
    // example); the test run in c fails; the second list is right, and is executed from its
    // first step.
    let (_file, store) = store().await;
    let model = Arc::new(FakeModel::default());
    let tools = Arc::new(FakeTools::default());
    let first = vec![
        json!({"tool": "search", "args": {"query": "db.url"}}),
        edit("a/config.py"),
        edit("b/config.py"),
        edit("c/config.py"),
        run("a"),
        run("b"),
        run("c"),
    ];
    let mut second = first.clone();
    second.insert(4, edit("c/start.sh"));
    model.reply("strategic", "v1", 1, json!({ "steps": first }), 20_000);
    model.reply("strategic", "v1", 2, json!({ "steps": second }), 24_000);
    let v1 = V1Engine::new(ports(&model, &tools));
    let task = run_task(
        store.clone(),
        &v1,
        WORKED_GOAL,
        Strategy::V1,
        budget(200_000),
    )
    .await;
    let result = task.result.clone().expect("result");
    assert_eq!(task.status, TaskStatus::Succeeded, "{result:#}");
    assert_eq!(result["engine"], "v1");
    assert_eq!(result["lists"], 2);
    // Six finished steps of the first list were thrown away ...
    assert_eq!(result["discarded_steps"], 6);
    // ... so the search ran twice and each finished patch was asked for again. The patches
    // keep their identity (content-derived keys): a receipt-keeping tool client answers the
    // repeats from their receipts (these fake tools keep none, so they see every request).
    assert_eq!(tools.calls("search").len(), 2);
    let edits_of = |path: &str| {
        tools
            .calls("edit_file")
            .iter()
            .filter(|c| c.args["path"] == path)
            .count()
    };
    assert_eq!(edits_of("a/config.py"), 2);
    assert_eq!(edits_of("b/config.py"), 2);
    assert_eq!(tools.distinct_keys("edit_file"), 4);
    assert_eq!(result["metrics"]["replans"], 1);
    let v1_tokens = result["spend"]["tokens"].as_u64().expect("tokens");
    assert_eq!(v1_tokens, 44_000);

    // v2 on the same world: the m4 failure is repaired locally; m1's search and the patches
    // of a and b are never repeated.
    let model = Arc::new(FakeModel::default());
    let tools = Arc::new(FakeTools::default());
    script_worked_example(&model);
    let v2 = V2Engine::new(model.clone(), tools.clone(), EngineSettings::default());
    let task = run_task(
        store.clone(),
        &v2,
        WORKED_GOAL,
        Strategy::V2,
        budget(200_000),
    )
    .await;
    assert_eq!(task.status, TaskStatus::Succeeded);
    assert_eq!(tools.calls("search").len(), 1);
    let edits_of = |path: &str| {
        tools
            .calls("edit_file")
            .iter()
            .filter(|c| c.args["path"] == path)
            .count()
    };
    assert_eq!(edits_of("a/config.py"), 1);
    assert_eq!(edits_of("b/config.py"), 1);
    let passed = task.result.expect("result")["passed"].clone();
    assert_eq!(passed, json!(["m1", "m2", "m3", "m4"]));
}

#[tokio::test]
async fn v1_gives_up_after_its_replan_budget() {
    let (_file, store) = store().await;
    let model = Arc::new(FakeModel::default());
    let tools = Arc::new(FakeTools::default());
    tools.broken.lock().unwrap().insert("run".into());
    model.reply("strategic", "v1", 0, json!({"steps": [run("a")]}), 1_000);
    let v1 = V1Engine::new(ports(&model, &tools));
    let task = run_task(
        store.clone(),
        &v1,
        "run the tests",
        Strategy::V1,
        budget(50_000),
    )
    .await;
    assert_eq!(task.status, TaskStatus::Failed);
    // One list plus the default two replans.
    assert_eq!(model.calls(Purpose::Strategic, Some("v1")).len(), 3);
    assert_eq!(tools.calls("run").len(), 3);
}

#[tokio::test]
async fn one_shot_makes_one_model_call_and_no_tool_call() {
    let (_file, store) = store().await;
    let model = Arc::new(FakeModel::default());
    let tools = Arc::new(FakeTools::default());
    model.reply(
        "tactical",
        "one_shot",
        1,
        json!({"answer": "5 km is 3.11 miles"}),
        150,
    );
    let engine = OneShotEngine::new(ports(&model, &tools));
    let task = run_task(
        store.clone(),
        &engine,
        "convert 5 km to miles",
        Strategy::OneShot,
        budget(10_000),
    )
    .await;
    let result = task.result.clone().expect("result");
    assert_eq!(task.status, TaskStatus::Succeeded, "{result:#}");
    assert_eq!(result["answer"], "5 km is 3.11 miles");
    assert_eq!(result["spend"]["tokens"], 150);
    assert_eq!(result["spend"]["tool_calls"], 0);
    assert_eq!(model.log.lock().unwrap().len(), 1);
    assert!(tools.log.lock().unwrap().is_empty());
    let entries = store
        .list_ledger_entries(cairn::domain::task::DEFAULT_TENANT, task.id)
        .await
        .expect("ledger");
    assert!(
        entries
            .iter()
            .any(|e| e.kind == "charge" && e.unit == "tokens" && e.amount == 150)
    );
}

#[tokio::test]
async fn reactive_sees_each_observation_before_its_next_call() {
    let (_file, store) = store().await;
    let model = Arc::new(FakeModel::default());
    let tools = Arc::new(FakeTools::default());
    model.reply(
        "tactical",
        "reactive",
        1,
        json!({"tool": "search", "args": {"query": "db.url"}}),
        500,
    );
    model.reply("tactical", "reactive", 2, edit("a/config.py"), 600);
    model.reply("tactical", "reactive", 3, run("a"), 700);
    model.reply(
        "tactical",
        "reactive",
        4,
        json!({"done": true, "answer": "patched a"}),
        800,
    );
    let engine = ReactiveEngine::new(ports(&model, &tools));
    let task = run_task(
        store.clone(),
        &engine,
        "patch service a",
        Strategy::Reactive,
        budget(50_000),
    )
    .await;
    let result = task.result.clone().expect("result");
    assert_eq!(task.status, TaskStatus::Succeeded, "{result:#}");
    assert_eq!(result["spend"]["tokens"], 2_600);
    assert_eq!(result["spend"]["tool_calls"], 3);
    let asked = model.calls(Purpose::Tactical, Some("reactive"));
    assert_eq!(asked.len(), 4);
    // Round n sees the n-1 calls before it as a conversation (its call, then the result), the
    // last result the passing test run.
    for (index, call) in asked.iter().enumerate() {
        assert_eq!(call.turns.len(), 2 * index, "round {}", index + 1);
        assert!(call.input.get("observations").is_none());
    }
    let last = &asked[3].turns;
    assert_eq!(
        last[4].speaker,
        cairn::engine::runtime::ports::Speaker::Model
    );
    assert_eq!(last[5].content["output"]["exit_code"], 0);
    assert_eq!(last[5].content["result_of"], "r3");
    let events = event_kinds(&store, &task).await;
    let steps = events
        .iter()
        .filter(|(_, k, _)| k == "step.finished")
        .count();
    assert_eq!(steps, 3);
}

#[tokio::test]
async fn reactive_stops_at_its_budget() {
    let (_file, store) = store().await;
    let model = Arc::new(FakeModel::default());
    let tools = Arc::new(FakeTools::default());
    model.reply(
        "tactical",
        "reactive",
        0,
        json!({"tool": "search", "args": {"query": "x"}}),
        4_000,
    );
    let engine = ReactiveEngine::new(ports(&model, &tools));
    let task = run_task(
        store.clone(),
        &engine,
        "loop forever",
        Strategy::Reactive,
        budget(10_000),
    )
    .await;
    assert_eq!(task.status, TaskStatus::BudgetExhausted);
    // Two calls of 4,000 tokens fit; the third is reserved before it is sent, cannot fit the
    // 2,000 left, and is never sent (before reservations it was sent and overshot the budget).
    assert_eq!(model.log.lock().unwrap().len(), 2);
    let spent = task.result.as_ref().map(|r| r["spend"]["tokens"].clone());
    assert_eq!(spent, Some(json!(8_000)), "within the budget");
}
