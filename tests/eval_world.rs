//! The evaluation's suite files and the simulated world's rules, checked directly: the default
//! suite's coverage, load-time validation, the knowledge rule (a fact in context is known,
//! otherwise a seeded guess that is the same whichever strategy asks), and the world's tools
//! behind receipts.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use cairn::domain::task::{DEFAULT_TENANT, NewTask, Strategy};
use cairn::engine::runtime::ports::{ModelCall, ModelPort, Purpose, Repeat, ToolCall, ToolPort};
use cairn::engine::runtime::receipted::Receipted;
use cairn::store::Store;
use cairn::store::sqlite::SqliteStore;
use cairn_eval::suite::{Category, Suite, SuiteError};
use cairn_eval::world::{META_KEY, StepJudged, Verdict, World};
use serde_json::{Value, json};

#[test]
fn the_default_suite_covers_every_category_and_injected_failure() {
    let suite = Suite::load(std::path::Path::new("suites/default")).expect("default suite");
    assert!(suite.tasks.len() >= 40, "{} tasks", suite.tasks.len());
    for category in [Category::Simple, Category::Medium, Category::Uncertain] {
        assert!(suite.tasks.iter().any(|t| t.category == category));
    }
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for fault in suite.tasks.iter().filter_map(|t| t.fault.as_ref()) {
        *counts.entry(fault.kind.as_str()).or_default() += 1;
    }
    // Every injected failure class (docs/evaluation.md, "Suites") at least three times.
    assert!(counts.values().all(|n| *n >= 3), "{counts:?}");
    let faults: BTreeSet<&str> = counts.keys().copied().collect();
    let expected = [
        "incomplete_evidence",
        "invalid_intermediate",
        "missing_file",
        "resource_disappears",
        "tool_timeout",
        "unexpected_response",
    ];
    assert_eq!(faults, expected.into_iter().collect());
}

#[test]
fn a_fact_used_before_it_is_revealed_is_refused_at_load() {
    let text = r#"
name = "bad"
[[tasks]]
id = "t"
category = "medium"
goal = "g"
steps = [
  { id = "a", tool = "x", args = { p = "{later}" } },
  { id = "b", tool = "y", reveals = { later = "v" } },
]
"#;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("suite.toml"), text).expect("write");
    match Suite::load(dir.path()) {
        Err(SuiteError::Invalid { task, message }) => {
            assert_eq!(task, "t");
            assert!(message.contains("{later}"), "{message}");
        }
        other => panic!("expected a validation error, got {other:?}"),
    }
}

const SUITE: &str = r#"
name = "one"
[world]
seed = 3
guess_success = 0.5
[[tasks]]
id = "dep"
category = "medium"
goal = "find the module and patch it"
steps = [
  { id = "find", tool = "search", args = { q = "bug" }, reveals = { module = "src/hidden_module.rs" } },
  { id = "patch", tool = "edit", args = { path = "{module}" }, writes = true },
]
"#;

async fn world() -> (common::TestSqlite, Arc<dyn Store>, World, uuid::Uuid) {
    let file = common::TestSqlite::create();
    let store = SqliteStore::open(&file.path).await.expect("open");
    store.migrate().await.expect("migrate");
    let store: Arc<dyn Store> = Arc::new(store);
    let suite: Suite = toml::from_str(SUITE).expect("suite");
    suite.check().expect("valid");
    let id = uuid::Uuid::now_v7();
    store
        .create_task(
            NewTask {
                tools: None,
                id,
                tenant_id: DEFAULT_TENANT.into(),
                goal: "find the module and patch it".into(),
                strategy: Strategy::V1,
                budget: cairn::domain::task::Budget {
                    tokens: 1000,
                    tool_calls: 10,
                    wall_ms: 1000,
                    cost: None,
                },
                metadata: json!({META_KEY: {"task": "dep", "repeat": 0}}),
                approval: Default::default(),
            },
            None,
            chrono::Utc::now(),
        )
        .await
        .expect("create");
    let world = World::new(Arc::new(suite), store.clone());
    (file, store, world, id)
}

fn ask(id: uuid::Uuid, purpose: Purpose, milestone: &str, input: Value) -> ModelCall {
    ModelCall {
        purpose,
        task_id: id,
        milestone: Some(milestone.into()),
        attempt: 1,
        prompt: "p".into(),
        input,
        turns: Vec::new(),
        schema: None,
        sampling: Default::default(),
        max_tokens: 1024,
        retry_max_tokens: 2048,
    }
}

#[tokio::test]
async fn a_fact_in_context_is_known_and_a_guess_does_not_depend_on_the_strategy() {
    let (_file, _store, world, id) = world().await;
    // v1 writes its list before anything ran: the module path is a guess.
    let blind = json!({"goal": "find the module and patch it"});
    let v1 = world
        .complete(ask(id, Purpose::Strategic, "v1", blind.clone()))
        .await
        .expect("v1 list");
    let guessed = v1.value["steps"][1]["args"]["path"].clone();
    // The same question again gives the same guess (seeded, not random).
    let again = world
        .complete(ask(id, Purpose::Strategic, "v1", blind))
        .await
        .expect("v1 list");
    assert_eq!(again.value["steps"][1]["args"]["path"], guessed);
    // Reactive, after the search ran, has the fact in context and writes it right.
    let found = world
        .call(ToolCall {
            task_id: id,
            tool: "search".into(),
            args: json!({"q": "bug"}),
            repeat: Repeat::default(),
        })
        .await
        .expect("search");
    assert_eq!(found.output["module"], "src/hidden_module.rs");
    let input = json!({"goal": "g", "observations": [{"output": found.output}]});
    let next = world
        .complete(ask(id, Purpose::Tactical, "reactive", input))
        .await
        .expect("next");
    assert_eq!(next.value["tool"], "edit");
    assert_eq!(next.value["args"]["path"], "src/hidden_module.rs");
    // A wrong path is refused by the tool and performs nothing.
    let wrong = world
        .call(ToolCall {
            task_id: id,
            tool: "edit".into(),
            args: json!({"path": "guess-module-0"}),
            repeat: Repeat::default(),
        })
        .await
        .expect("edit");
    assert!(wrong.error.is_some());
    assert_eq!(world.task_world(id).performed.get("patch"), None);
    // Tokens grow with the context sent.
    assert!(next.tokens > 300);
}

#[tokio::test]
async fn a_real_answer_is_judged_against_the_ground_truth_as_it_stands() {
    let (_file, _store, world, id) = world().await;
    let blind = json!({"goal": "find the module and patch it", "observations": []});
    let call = ask(id, Purpose::Tactical, "reactive", blind);
    let judge = |value: Value| {
        let world = &world;
        let call = call.clone();
        async move { world.judge(&call, &value).await.expect("judged") }
    };
    let next = judge(json!({"tool": "search", "args": {"q": "bug"}})).await;
    assert_eq!((next.pending, next.unwritten), (2, 2));
    assert_eq!(next.first, Verdict::Next);
    let later = judge(json!({"tool": "edit", "args": {"path": "src/hidden_module.rs"}})).await;
    assert_eq!(later.first, Verdict::Later);
    let wrong = judge(json!({"tool": "edit", "args": {"path": "src/guess.rs"}})).await;
    assert_eq!(wrong.first, Verdict::WrongArgs);
    assert_eq!(
        judge(json!({"tool": "deploy", "args": {}})).await.first,
        Verdict::Other
    );
    let stop = judge(json!({"done": true, "answer": "patched"})).await;
    assert_eq!(stop.first, Verdict::Stop);
    // A list covering only the first pending step.
    let list =
        judge(json!({"steps": [{"id": "s1", "tool": "search", "args": {"q": "bug"}}]})).await;
    assert_eq!((list.first, list.covered), (Verdict::Next, Some(1)));
    // Every call of a list in its place: the edit's path is a fact no output has shown yet, so
    // a right one is a lucky guess and a wrong one a failed guess (`unseen`); the same edit
    // again is a repeat, a tool no step uses `other`.
    let step = |verdict, unseen| StepJudged { verdict, unseen };
    let guessed = judge(json!({"steps": [
        {"tool": "search", "args": {"q": "bug"}},
        {"tool": "edit", "args": {"path": "src/hidden_module.rs"}},
        {"tool": "edit", "args": {"path": "src/hidden_module.rs"}},
        {"tool": "deploy", "args": {}}]}))
    .await;
    assert_eq!(
        guessed.steps,
        vec![
            step(Verdict::Next, false),
            step(Verdict::Next, true),
            step(Verdict::Repeat, false),
            step(Verdict::Other, false)
        ]
    );
    let failed = judge(json!({"steps": [
        {"tool": "edit", "args": {"path": "src/guess.rs"}},
        {"tool": "search", "args": {"q": "bug"}}]}))
    .await;
    assert_eq!(
        failed.steps,
        vec![step(Verdict::WrongArgs, true), step(Verdict::Next, false)]
    );
    assert!(next.steps.is_empty(), "one move has no list");
    let calibration = cairn_eval::trace::calibrate(&[next, later, wrong, stop, list]);
    assert_eq!(calibration.calls, 5);
    assert_eq!(calibration.kinds[0].kind, "tactical/reactive");
    assert_eq!(calibration.kinds[0].stop, 1);
}

/// In an evaluation the world's tools sit behind the receipts a deployment's tool client keeps
/// (`cairn_eval::compose`): a repair that lists a done write again gets the first answer, and
/// the world performs the write once; a read, or a write with other arguments, reaches it.
#[tokio::test]
async fn behind_receipts_the_world_performs_an_identical_write_once() {
    let (_file, store, world, id) = world().await;
    let world = Arc::new(world);
    let receipts: Arc<dyn cairn::tools::ReceiptStore> =
        Arc::new(cairn::tools::StoreReceipts(store.clone()));
    let tools = Receipted::new(world.clone(), receipts, Arc::new(cairn::clock::SystemClock));
    let call = |tool: &str, args: Value| ToolCall {
        task_id: id,
        tool: tool.into(),
        args,
        repeat: Repeat::Nth(0),
    };
    for _ in 0..2 {
        let found = tools.call(call("search", json!({"q": "bug"}))).await;
        assert_eq!(found.expect("search").error, None);
    }
    let patch = json!({"path": "src/hidden_module.rs"});
    let first = tools.call(call("edit", patch.clone())).await.expect("edit");
    assert_eq!(first.error, None, "{first:?}");
    let again = tools.call(call("edit", patch)).await.expect("edit again");
    assert_eq!(again, first);
    let state = world.task_world(id);
    assert_eq!(
        state.tool_calls, 3,
        "two reads and one write reached the world"
    );
    assert_eq!(state.performed.get("patch"), Some(&1));
    assert_eq!(state.repeated_side_effects, 0);
    // The same write straight to the world (what an evaluation did before): performed twice.
    let direct = world.call(call("edit", json!({"path": "src/hidden_module.rs"})));
    assert_eq!(direct.await.expect("direct").error, None);
    assert_eq!(world.task_world(id).repeated_side_effects, 1);
}

/// v2 offers writers only to a goal that reads as a change (`engine::planner::permit`). Every task of
/// the shipped suites that needs a write must read as one, or v2 could never do it; and a task
/// whose goal asks for nothing to change must not.
#[test]
fn every_goal_that_needs_a_write_reads_as_a_change() {
    for name in ["default", "small"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("suites")
            .join(name);
        let suite = Suite::load(&path).expect("suite");
        let writers: Vec<&str> = suite
            .tools
            .keys()
            .map(String::as_str)
            .filter(|tool| {
                suite
                    .tasks
                    .iter()
                    .flat_map(|t| &t.steps)
                    .any(|s| s.tool == *tool && s.writes)
            })
            .collect();
        let mut missed = Vec::new();
        for task in &suite.tasks {
            let needs = task.steps.iter().any(|s| s.writes);
            let features = cairn::domain::gate::heuristic_features(&task.goal, &writers);
            if needs && !features.touches_writes {
                missed.push(task.id.clone());
            }
        }
        assert!(missed.is_empty(), "{name}: writes not seen in {missed:?}");
    }
}
