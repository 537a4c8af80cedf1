//! A shadow run: the candidate strategy runs on a copy of a real task; its side-effecting
//! calls reach only the sandbox (or are refused when the tool has no sandbox), read-only calls
//! still see the real world, and both outcomes are stored side by side.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod engine_fakes;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Path, State};
use axum::routing::post;
use cairn::clock::SystemClock;
use cairn::domain::settings::EngineSettings;
use cairn::domain::task::SHADOW_OF;
use cairn::domain::task::{DEFAULT_TENANT, NewTask, Strategy, Task, TaskStatus};
use cairn::engine::baselines::BaselineConfig;
use cairn::engine::dispatch::{Dispatch, Engines};
use cairn::engine::rollout::Rollout;
use cairn::engine::runtime::adapters::ClientTools;
use cairn::engine::runtime::ports::ToolPort;
use cairn::engine::runtime::sandbox::ShadowTools;
use cairn::engine::shadow::{side_by_side, start_shadow};
use cairn::engine::{Engine, RunContext, RunOutcome, StopSignal};
use cairn::store::ClaimParams;
use cairn::store::Store;
use cairn::store::sqlite::SqliteStore;
use cairn::tools::{MemoryReceipts, ToolClient, ToolRegistry, ToolSpec};
use engine_fakes::{FakeModel, budget};
use serde_json::{Value, json};

type Calls = Arc<Mutex<BTreeMap<String, u32>>>;

/// A tool endpoint that counts calls per tool and says where it is.
async fn tool_server(label: &'static str) -> (String, Calls) {
    let calls: Calls = Arc::default();
    let app = axum::Router::new()
        .route(
            "/{tool}",
            post(
                move |State(calls): State<Calls>,
                      Path(tool): Path<String>,
                      Json(_args): Json<Value>| async move {
                    *calls.lock().unwrap().entry(tool.clone()).or_default() += 1;
                    Json(json!({"output": {"done": tool, "at": label}}))
                },
            ),
        )
        .with_state(calls.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (base, calls)
}

fn spec(name: &str, real: &str, side_effects: bool, sandbox: Option<&str>) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("test tool {name}"),
        args_schema: json!({"type": "object"}),
        url: format!("{real}/{name}"),
        timeout_ms: 5_000,
        side_effects,
        artifacts: Vec::new(),
        idempotent: true,
        sandbox_url: sandbox.map(|s| format!("{s}/{name}")),
        simulated: false,
    }
}

fn count(calls: &Calls, tool: &str) -> u32 {
    calls.lock().unwrap().get(tool).copied().unwrap_or(0)
}

/// Claims the queued task `id` and runs it through `engine` until it is terminal.
async fn run(store: &Arc<dyn Store>, engine: &dyn Engine, id: uuid::Uuid) -> Task {
    for _ in 0..3 {
        let claimed = store
            .claim(ClaimParams::new(
                "test",
                chrono::Utc::now(),
                chrono::Duration::seconds(60),
            ))
            .await
            .expect("claim")
            .expect("queued task");
        assert_eq!(claimed.task.id, id);
        let (_tx, rx) = tokio::sync::watch::channel(StopSignal::Run);
        let ctx = RunContext {
            task: claimed.task,
            lease: claimed.lease,
            state: claimed.state,
            store: store.clone(),
            clock: Arc::new(SystemClock),
            stop: rx,
            inbox: cairn::engine::Inbox::new(),
            meters: cairn::meters::Meters::new(),
        };
        if let RunOutcome::Finished(_) = engine.run(ctx).await.expect("run") {
            break;
        }
    }
    store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("task")
}

#[tokio::test]
async fn a_shadow_run_sends_side_effects_only_to_the_sandbox() {
    let (real, real_calls) = tool_server("real").await;
    let (sandbox, sandbox_calls) = tool_server("sandbox").await;
    let registry = Arc::new(
        ToolRegistry::from_specs(
            vec![
                spec("lookup", &real, false, None),
                spec("deploy", &real, true, Some(&sandbox)),
                spec("notify", &real, true, None),
            ],
            "test",
        )
        .expect("registry"),
    );
    let file = common::TestSqlite::create();
    let store = SqliteStore::open(&file.path).await.expect("open");
    store.migrate().await.expect("migrate");
    let store: Arc<dyn Store> = Arc::new(store);

    // The model (the same script for both runs): look up, deploy, notify, done.
    let model = Arc::new(FakeModel::default());
    model.reply(
        "tactical",
        "reactive",
        1,
        json!({"tool": "lookup", "args": {"q": "build"}}),
        100,
    );
    model.reply(
        "tactical",
        "reactive",
        2,
        json!({"tool": "deploy", "args": {"build": "42"}}),
        100,
    );
    model.reply(
        "tactical",
        "reactive",
        3,
        json!({"tool": "notify", "args": {"to": "ops"}}),
        100,
    );
    model.reply(
        "tactical",
        "reactive",
        4,
        json!({"done": true, "answer": "deployed"}),
        100,
    );
    let clock = Arc::new(SystemClock);
    let real_tools = Arc::new(ClientTools::new(ToolClient::new(
        registry.clone(),
        Some(Arc::new(MemoryReceipts::default())),
        clock.clone(),
    )));
    let shadow_tools = Arc::new(ShadowTools::new(&ToolClient::new(
        registry.clone(),
        Some(Arc::new(MemoryReceipts::default())),
        clock,
    )));
    assert!(shadow_tools.refused().contains("notify"));
    let engines = |tools: Arc<dyn ToolPort>| {
        Engines::new(
            model.clone(),
            tools,
            EngineSettings::default(),
            BaselineConfig::default(),
        )
    };
    let engine = Dispatch::new(
        engines(real_tools),
        engines(shadow_tools),
        Arc::new(Rollout::default()),
    );

    // The real task touches the real world.
    let created = store
        .create_task(
            NewTask {
                tools: None,
                id: uuid::Uuid::now_v7(),
                tenant_id: DEFAULT_TENANT.into(),
                goal: "deploy build 42 and tell ops".into(),
                strategy: Strategy::Reactive,
                budget: budget(10_000),
                metadata: json!({}),
                approval: Default::default(),
            },
            None,
            chrono::Utc::now(),
        )
        .await
        .expect("create");
    let original = run(&store, &engine, created.task.id).await;
    assert_eq!(original.status, TaskStatus::Succeeded);
    assert_eq!(
        (
            count(&real_calls, "lookup"),
            count(&real_calls, "deploy"),
            count(&real_calls, "notify")
        ),
        (1, 1, 1)
    );

    // The shadow copy: the real world sees only the read-only lookup again.
    let copy = start_shadow(
        store.as_ref(),
        &original,
        Strategy::Reactive,
        chrono::Utc::now(),
    )
    .await
    .expect("shadow copy");
    assert_eq!(copy.metadata[SHADOW_OF], json!(original.id));
    assert_eq!(copy.goal, original.goal);
    let shadow = run(&store, &engine, copy.id).await;
    assert_eq!(shadow.status, TaskStatus::Succeeded);
    assert_eq!(count(&real_calls, "lookup"), 2);
    assert_eq!(
        count(&real_calls, "deploy"),
        1,
        "the shadow deployed for real"
    );
    assert_eq!(
        count(&real_calls, "notify"),
        1,
        "the shadow notified for real"
    );
    assert_eq!(count(&sandbox_calls, "deploy"), 1);
    assert_eq!(count(&sandbox_calls, "notify"), 0);
    assert_eq!(count(&sandbox_calls, "lookup"), 0);
    // The refusal is visible in the shadow's own history.
    let events = store
        .list_events(DEFAULT_TENANT, shadow.id, 0, 1000)
        .await
        .expect("events");
    let refused = events
        .iter()
        .filter(|e| e.kind == "step.finished" && e.data["tool"] == "notify")
        .map(|e| e.data["error"].as_str().unwrap_or("").to_string())
        .collect::<Vec<_>>();
    assert_eq!(refused.len(), 1);
    assert!(
        refused[0].contains("refused in a shadow run"),
        "{refused:?}"
    );

    // Both outcomes, side by side.
    let both = side_by_side(store.as_ref(), DEFAULT_TENANT, original.id, shadow.id)
        .await
        .expect("side by side");
    assert_eq!(both["original"]["status"], "succeeded");
    assert_eq!(both["shadow"]["status"], "succeeded");
    assert_eq!(both["shadow"]["id"], json!(shadow.id));
}

#[tokio::test]
async fn the_api_starts_a_shadow_copy_and_compares_it() {
    let file = common::TestSqlite::create();
    let store = SqliteStore::open(&file.path).await.expect("open");
    store.migrate().await.expect("migrate");
    let store: Arc<dyn Store> = Arc::new(store);
    let state = cairn::http::AppState::new(
        store.clone(),
        Arc::new(SystemClock),
        cairn::config::Config::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(cairn::http::serve(listener, state, async move {
        let _ = stopped.await;
    }));
    let http = reqwest::Client::new();
    let original: Value = http
        .post(format!("{base}/v1/tasks"))
        .json(&json!({"goal": "deploy build 42", "strategy": "v1",
                      "budget": {"tokens": 1000, "tool_calls": 5, "wall_ms": 60000}}))
        .send()
        .await
        .expect("create")
        .json()
        .await
        .expect("json");
    let id = original["id"].as_str().expect("id").to_string();
    let started = http
        .post(format!("{base}/v1/tasks/{id}/shadow"))
        .json(&json!({"strategy": "v2"}))
        .send()
        .await
        .expect("shadow");
    assert_eq!(started.status(), 201);
    let copy: Value = started.json().await.expect("json");
    assert_eq!(copy["metadata"][SHADOW_OF], id);
    assert_eq!(copy["strategy"], "v2");
    assert_eq!(copy["goal"], "deploy build 42");
    let copy_id = copy["id"].as_str().expect("id").to_string();
    let again = http
        .post(format!("{base}/v1/tasks/{copy_id}/shadow"))
        .json(&json!({"strategy": "v2"}))
        .send()
        .await
        .expect("shadow of shadow");
    assert_eq!(again.status(), 409);
    let both: Value = http
        .get(format!("{base}/v1/tasks/{copy_id}/shadow"))
        .send()
        .await
        .expect("compare")
        .json()
        .await
        .expect("json");
    assert_eq!(both["original"]["id"], id);
    assert_eq!(both["shadow"]["id"], copy_id);
    assert_eq!(both["original"]["strategy"], "v1");
    let not_shadow = http
        .get(format!("{base}/v1/tasks/{id}/shadow"))
        .send()
        .await
        .expect("compare");
    assert_eq!(not_shadow.status(), 404);
    let _ = stop.send(());
    let _ = server.await;
}
