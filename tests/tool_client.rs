//! The tool client against the simulator: schema rejection before sending, deterministic
//! idempotency keys, receipts (in memory, in SQLite and in Postgres), the answer contract, and
//! failure classification.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use cairn::clock::SystemClock;
use cairn::sim::{Scenario, SimServer};
use cairn::store::Store;
use cairn::store::postgres::PgStore;
use cairn::store::sqlite::SqliteStore;
use cairn::tools::{
    MemoryReceipts, ReceiptStore, Repeat, StoreReceipts, ToolCall, ToolClient, ToolError,
    ToolFailure, ToolRegistry, ToolSpec, idempotency_key,
};
use serde_json::{Value, json};
use uuid::Uuid;

async fn sim(name: &str) -> SimServer {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name);
    let scenario = Scenario::load(&path).expect("scenario loads");
    SimServer::start(scenario, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("sim starts")
}

/// A call identified by its content; `repeat` counts earlier identical actions of its list.
fn call(task: Uuid, repeat: u32, tool: &str, args: Value) -> ToolCall {
    ToolCall {
        task_id: task,
        tool: tool.into(),
        args,
        repeat: Repeat::Nth(repeat),
        sandbox: false,
    }
}

fn edit(path: &str) -> Value {
    json!({"path": path, "find": "db.url", "replace": "db.dsn"})
}

fn client(server: &SimServer, receipts: Option<Arc<dyn ReceiptStore>>) -> ToolClient {
    ToolClient::new(server.registry(), receipts, Arc::new(SystemClock))
}

fn tool_stats(server: &SimServer, tool: &str) -> (u64, u64) {
    let stats = server.stats();
    let tool = stats.tools.get(tool).expect("tool listed");
    (tool.calls, tool.distinct_keys)
}

#[tokio::test]
async fn invalid_arguments_and_unknown_tools_are_refused_before_sending() {
    let server = sim("worked_example.json").await;
    let client = client(&server, None);
    let task = Uuid::now_v7();

    let error = client
        .call(&call(task, 0, "edit_file", json!({"path": "c/start.sh"})))
        .await
        .expect_err("find and replace are missing");
    let ToolError::InvalidArgs { messages, .. } = &error else {
        panic!("expected invalid args, got {error}");
    };
    assert!(messages.iter().any(|m| m.contains("find")), "{messages:?}");
    assert_eq!(error.failure(), ToolFailure::InvalidArgs);
    assert!(error.never_sent() && !error.is_transient());

    let error = client
        .call(&call(
            task,
            0,
            "run",
            json!({"cmd": "make test", "cwd": "d"}),
        ))
        .await
        .expect_err("cwd must be a, b or c");
    assert_eq!(error.failure(), ToolFailure::InvalidArgs);

    let error = client
        .call(&call(task, 0, "teleport", json!({})))
        .await
        .expect_err("not registered");
    assert_eq!(error.failure(), ToolFailure::UnknownTool);

    assert_eq!(tool_stats(&server, "edit_file"), (0, 0), "nothing was sent");
    assert_eq!(tool_stats(&server, "run"), (0, 0));
}

/// The receipt behaviour every receipt store must give.
async fn receipts_prevent_a_second_side_effect(receipts: Arc<dyn ReceiptStore>) {
    let server = sim("worked_example.json").await;
    let client = client(&server, Some(receipts.clone()));
    let task = Uuid::now_v7();
    let patch = call(task, 0, "edit_file", edit("c/start.sh"));

    let first = client.call(&patch).await.expect("patched");
    assert_eq!(
        first.idempotency_key,
        idempotency_key(task, "edit_file", &edit("c/start.sh"), &Repeat::Nth(0))
    );
    assert!(!first.from_receipt && first.simulated);
    assert_eq!(first.output["patched"], "c/start.sh");
    let stored = receipts
        .get(task, &first.idempotency_key)
        .await
        .expect("read receipt")
        .expect("a receipt was stored");
    assert_eq!((stored.task_id, stored.tool.as_str()), (task, "edit_file"));

    // The same logical call again (a resumed step): answered from the receipt, not sent.
    let again = client.call(&patch).await.expect("from receipt");
    assert!(again.from_receipt);
    assert_eq!(
        (again.output.clone(), again.idempotency_key.clone()),
        (first.output.clone(), first.idempotency_key.clone())
    );
    assert_eq!(tool_stats(&server, "edit_file"), (1, 1));

    // The same action with its arguments in another order (another step, attempt, repair or
    // plan version asking for it): the same key, answered from the receipt.
    let reordered = json!({"replace": "db.dsn", "find": "db.url", "path": "c/start.sh"});
    let same = client
        .call(&call(task, 0, "edit_file", reordered))
        .await
        .expect("from receipt");
    assert!(same.from_receipt);
    assert_eq!(same.idempotency_key, first.idempotency_key);
    assert_eq!(tool_stats(&server, "edit_file"), (1, 1));

    // A deliberate repeat (a second identical step in one list) is a new key and a new call.
    let repeat = client
        .call(&call(task, 1, "edit_file", edit("c/start.sh")))
        .await
        .expect("deliberate repeat");
    assert!(!repeat.from_receipt);
    assert_ne!(repeat.idempotency_key, first.idempotency_key);
    assert_eq!(tool_stats(&server, "edit_file"), (2, 2));
    // Other arguments are another action.
    let other = client
        .call(&call(task, 0, "edit_file", edit("c/config.py")))
        .await
        .expect("another file");
    assert!(!other.from_receipt);
    assert_eq!(tool_stats(&server, "edit_file"), (3, 3));

    // Tools without side effects never get receipts: `run` is sent every time.
    let check = call(task, 0, "run", json!({"cmd": "make test", "cwd": "c"}));
    for _ in 0..2 {
        let result = client.call(&check).await.expect("run");
        assert!(!result.from_receipt);
        assert!(
            receipts
                .get(check.task_id, &result.idempotency_key)
                .await
                .expect("read")
                .is_none()
        );
    }
    assert_eq!(tool_stats(&server, "run"), (2, 1));
}

#[tokio::test]
async fn receipts_in_memory() {
    receipts_prevent_a_second_side_effect(Arc::new(MemoryReceipts::default())).await;
}

#[tokio::test]
async fn receipts_in_sqlite() {
    let db = common::TestSqlite::create();
    let store = SqliteStore::open(&db.path).await.expect("open sqlite");
    store.migrate().await.expect("migrate");
    let store: Arc<dyn Store> = Arc::new(store);
    receipts_prevent_a_second_side_effect(Arc::new(StoreReceipts(store))).await;
}

#[tokio::test]
async fn receipts_in_postgres() {
    let db = common::TestPg::create().await;
    let store = PgStore::connect(&db.url, 4).await.expect("connect");
    store.migrate().await.expect("migrate");
    let store: Arc<dyn Store> = Arc::new(store);
    receipts_prevent_a_second_side_effect(Arc::new(StoreReceipts(store))).await;
    db.drop_database().await;
}

#[tokio::test]
async fn without_receipts_a_repeat_is_sent_with_the_same_key() {
    let server = sim("worked_example.json").await;
    let client = client(&server, None);
    let task = Uuid::now_v7();
    let patch = call(task, 0, "edit_file", edit("c/start.sh"));
    let first = client.call(&patch).await.expect("first");
    let second = client.call(&patch).await.expect("second");
    assert_eq!(first.idempotency_key, second.idempotency_key);
    assert!(!second.from_receipt);
    // Two requests, one key: the tool could deduplicate; cairn's receipts are off here.
    assert_eq!(tool_stats(&server, "edit_file"), (2, 1));
}

#[tokio::test]
async fn state_rules_and_artifacts_follow_the_scenario() {
    let server = sim("worked_example.json").await;
    let client = client(&server, Some(Arc::new(MemoryReceipts::default())));
    let task = Uuid::now_v7();

    let search = client
        .call(&call(task, 0, "search", json!({"pattern": "db.url"})))
        .await
        .expect("search");
    assert_eq!(
        search.artifacts.get("usage_list"),
        Some(&json!(["a/config.py", "b/settings.py", "c/config.py"]))
    );

    // `run` has no side effects: it is sent every time, whatever its key.
    let test_c = |_occasion: &str| call(task, 0, "run", json!({"cmd": "make test", "cwd": "c"}));
    client
        .call(&call(task, 0, "edit_file", edit("c/config.py")))
        .await
        .expect("edit");
    let failing = client.call(&test_c("check.1")).await.expect("run");
    assert_eq!(failing.output["exit_code"], 1);
    assert!(
        failing.output["stderr"]
            .as_str()
            .is_some_and(|s| s.contains("c/start.sh"))
    );

    // Another task's edits do not count for this one.
    let other = Uuid::now_v7();
    client
        .call(&call(other, 0, "edit_file", edit("c/start.sh")))
        .await
        .expect("edit");
    assert_eq!(
        client.call(&test_c("check.2")).await.expect("run").output["exit_code"],
        1
    );

    client
        .call(&call(task, 0, "edit_file", edit("c/start.sh")))
        .await
        .expect("edit");
    assert_eq!(
        client.call(&test_c("check.3")).await.expect("run").output["exit_code"],
        0
    );
}

#[tokio::test]
async fn tool_failures_are_classified() {
    let server = sim("tool_faults.json").await;
    // `slow` gets a short timeout; everything else as the simulator registers it.
    let specs: Vec<ToolSpec> = server
        .registry()
        .specs()
        .cloned()
        .map(|mut spec| {
            if spec.name == "slow" {
                spec.timeout_ms = 300;
            }
            spec
        })
        .collect();
    let registry = Arc::new(ToolRegistry::from_specs(specs, "test").expect("registry"));
    let receipts = Arc::new(MemoryReceipts::default());
    let client = ToolClient::new(registry, Some(receipts.clone()), Arc::new(SystemClock));
    let task = Uuid::now_v7();
    let attempt = |tool: &str, _n: u32| call(task, 0, tool, json!({}));

    let error = client
        .call(&attempt("flaky", 1))
        .await
        .expect_err("500 first");
    assert_eq!(error.failure(), ToolFailure::ServerError);
    assert!(error.is_transient());
    assert!(client.call(&attempt("flaky", 2)).await.is_ok(), "then fine");

    let error = client.call(&attempt("slow", 1)).await.expect_err("hangs");
    assert_eq!(error.failure(), ToolFailure::Timeout);
    assert!(error.is_transient());

    let error = client
        .call(&attempt("garbled", 1))
        .await
        .expect_err("broken JSON");
    assert_eq!(error.failure(), ToolFailure::ContractViolation);
    assert!(!error.is_transient());

    let error = client
        .call(&attempt("cut", 1))
        .await
        .expect_err("cut short");
    assert_eq!(error.failure(), ToolFailure::Transport);
    assert!(error.is_transient());

    let error = client.call(&attempt("limited", 1)).await.expect_err("429");
    assert!(
        matches!(error, ToolError::Http { status: 429, .. }),
        "{error}"
    );
    assert_eq!(error.failure(), ToolFailure::ClientError);
    assert!(error.is_transient());

    let error = client
        .call(&attempt("refuse", 1))
        .await
        .expect_err("reports an error");
    assert!(
        matches!(&error, ToolError::Reported { message, .. } if message.contains("disk full")),
        "{error}"
    );
    assert_eq!(error.failure(), ToolFailure::ToolError);
    // Only the successful `flaky` call left a receipt; the reported error did not.
    assert_eq!(receipts.len(), 1);
}

#[tokio::test]
async fn a_4xx_from_the_tool_is_a_client_error_and_sandbox_calls_go_to_the_sandbox() {
    let live = sim("worked_example.json").await;
    let sandbox = sim("worked_example.json").await;
    // A registry laxer than the tool: cairn sends, the tool refuses with 422.
    let specs: Vec<ToolSpec> = live
        .registry()
        .specs()
        .cloned()
        .map(|mut spec| {
            spec.args_schema = json!({"type": "object"});
            spec.sandbox_url = Some(format!("{}/tools/{}", sandbox.base_url(), spec.name));
            spec
        })
        .collect();
    let registry = Arc::new(ToolRegistry::from_specs(specs, "test").expect("registry"));
    let client = ToolClient::new(registry, None, Arc::new(SystemClock));
    let task = Uuid::now_v7();

    let error = client
        .call(&call(task, 0, "edit_file", json!({"path": 1})))
        .await
        .expect_err("the tool refuses");
    assert!(
        matches!(error, ToolError::Http { status: 422, .. }),
        "{error}"
    );
    assert_eq!(error.failure(), ToolFailure::ClientError);
    assert!(!error.is_transient());

    let mut shadow = call(task, 0, "edit_file", edit("a/config.py"));
    shadow.sandbox = true;
    client.call(&shadow).await.expect("sandboxed");
    assert_eq!(tool_stats(&sandbox, "edit_file"), (1, 1));
    assert_eq!(
        tool_stats(&live, "edit_file"),
        (1, 1),
        "only the refused call reached live"
    );
}

#[tokio::test]
async fn get_v1_tools_lists_the_registry() {
    let server = sim("worked_example.json").await;
    let db = common::TestSqlite::create();
    let store = SqliteStore::open(&db.path).await.expect("open sqlite");
    store.migrate().await.expect("migrate");
    let state = cairn::http::AppState::new(
        Arc::new(store),
        Arc::new(SystemClock),
        cairn::config::Config::default(),
    )
    .with_tools(server.registry());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let api = tokio::spawn(cairn::http::serve(listener, state, async move {
        let _ = stopped.await;
    }));

    let body: Value = reqwest::get(format!("http://{addr}/v1/tools"))
        .await
        .expect("GET /v1/tools")
        .json()
        .await
        .expect("json");
    let items = body["items"].as_array().expect("items");
    let names: Vec<&str> = items.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        names,
        ["edit_file", "lookup", "run", "search", "write_note"]
    );
    let edit = &items[0];
    assert_eq!(edit["side_effects"], true);
    assert_eq!(edit["simulated"], true);
    assert_eq!(
        edit["args_schema"]["required"],
        json!(["path", "find", "replace"])
    );
    assert_eq!(
        edit["url"],
        format!("{}/tools/edit_file", server.base_url())
    );

    let _ = stop.send(());
    api.await.expect("join").expect("served");
}
