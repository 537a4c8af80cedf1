//! The MCP 2026-07-28 revision (no session, no `initialize`: `server/discover`, then every
//! request self-contained), against the official Rust SDK's own server, since no npm server
//! speaks it yet: a child `cairn serve` lists its tool on that revision, and a planned task
//! (`scenarios/mcp_tools.json`, goal `doc-7q2`) calls it once, with a receipt; the server
//! counts the calls and reads the W3C trace context cairn sends in `_meta`.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod serve_process;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn::domain::event::kinds;
use cairn::store::Store;
use cairn::store::sqlite::SqliteStore;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use serve_process::{Db, FAST_LEASES, Serve};

/// Writing tools, `stamp` and the others named in `offered`, counted; listed with a cache
/// hint of 0 ("may change at any time").
#[derive(Clone)]
struct Stamper {
    calls: Arc<AtomicUsize>,
    offered: Arc<Mutex<Vec<&'static str>>>,
    /// The `traceparent` of each call's `_meta`.
    traceparents: Arc<Mutex<Vec<String>>>,
}

impl ServerHandler for Stamper {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let offered = self.offered.lock().expect("offered").clone();
        let tools: Vec<Value> = offered
            .iter()
            .map(|name| {
                json!({
                    "name": name,
                    "description": "Stamps a document as approved; answers the stamp id",
                    "inputSchema": {"type": "object", "required": ["document"],
                                    "properties": {"document": {"type": "string"}}},
                    "outputSchema": {"type": "object",
                                     "properties": {"stamp": {"type": "string"}}},
                    "annotations": {"destructiveHint": false}
                })
            })
            .collect();
        Ok(serde_json::from_value(json!({"tools": tools, "ttlMs": 0})).expect("tools"))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        // The SDK hands a request's `_meta` to the handler in its context.
        if let Some(traceparent) = context.meta.0.get("traceparent").and_then(Value::as_str) {
            self.traceparents
                .lock()
                .expect("traceparents")
                .push(traceparent.to_string());
        }
        let document = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("document"))
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        Ok(CallToolResponse::Complete(CallToolResult::structured(
            json!({"stamp": format!("st-{n}-{document}")}),
        )))
    }
}

async fn start_server(server: Stamper) -> String {
    let config = StreamableHttpServerConfig::default().with_legacy_session_mode(false);
    let service: StreamableHttpService<Stamper, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(server.clone()), Default::default(), config);
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}/mcp")
}

/// A tools file registering the server at `url` as `sdk`; the file lives as long as the dir.
fn tools_file(url: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let tools = dir.path().join("tools.toml");
    std::fs::write(
        &tools,
        format!("[[mcp]]\nname = \"sdk\"\nurl = \"{url}\"\n"),
    )
    .expect("file");
    (dir, tools.display().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_on_the_2026_07_28_revision_is_listed_and_called_once() {
    let server = Stamper {
        calls: Arc::new(AtomicUsize::new(0)),
        offered: Arc::new(Mutex::new(vec!["stamp"])),
        traceparents: Arc::default(),
    };
    let url = start_server(server.clone()).await;
    let calls = server.calls.clone();
    let scenario =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/mcp_tools.json");
    let sim = cairn::sim::SimServer::start_file(&scenario, 0)
        .await
        .expect("simulator");
    let (_dir, tools) = tools_file(&url);
    let db = common::TestSqlite::create();
    let mut env: Vec<(&str, &str)> = FAST_LEASES.to_vec();
    env.extend([
        ("CAIRN_LLM_DEFAULT_BASE_URL", sim.base_url()),
        ("CAIRN_LLM_DEFAULT_MODEL", "cairn-sim"),
        ("CAIRN_TOOLS_FILE", tools.as_str()),
        // Traced (to a receiver that is not there: exports fail quietly), so calls carry
        // their trace context.
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
    ]);
    let serve = Serve::start(Db::Sqlite(&db.path), &env).await;
    let base = format!("http://{}", serve.addr);
    let listed: Value = reqwest::get(format!("{base}/v1/tools"))
        .await
        .expect("GET")
        .json()
        .await
        .expect("json");
    assert_eq!(listed["servers"][0]["protocol"], "2026-07-28", "{listed:#}");
    let stamp = &listed["items"][0];
    assert_eq!(stamp["name"], "sdk.stamp", "{listed:#}");
    assert_eq!(stamp["side_effects"], true, "no readOnlyHint: it writes");
    assert_eq!(stamp["artifacts"], json!(["stamp"]));

    let response = reqwest::Client::new()
        .post(format!("{base}/v1/tasks"))
        .json(
            &json!({"goal": "Stamp the document doc-7q2 as approved", "strategy": "v2",
                      "budget": {"tokens": 50_000, "tool_calls": 10, "wall_ms": 120_000}}),
        )
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status().as_u16(), 202);
    let id: uuid::Uuid = response.json::<Value>().await.expect("task")["id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("id");
    let store = SqliteStore::open(&db.path).await.expect("open");
    let deadline = Instant::now() + Duration::from_secs(60);
    let events = loop {
        let events = store
            .list_events("default", id, 0, 10_000)
            .await
            .expect("events");
        if events.iter().any(|e| kinds::is_terminal(&e.kind)) {
            break events;
        }
        assert!(Instant::now() < deadline, "the task did not end");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let task: Value = reqwest::get(format!("{base}/v1/tasks/{id}"))
        .await
        .expect("GET")
        .json()
        .await
        .expect("json");
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let step = events
        .iter()
        .find(|e| e.kind == kinds::STEP_FINISHED)
        .expect("the call");
    assert_eq!(
        step.data["output"],
        json!({"stamp": "st-1-doc-7q2"}),
        "{:#}",
        step.data
    );
    assert_eq!(
        task["result"]["artifacts"]["k1"]["stamp"], "st-1-doc-7q2",
        "{task:#}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let traceparents = server.traceparents.lock().expect("seen").clone();
    assert_eq!(traceparents.len(), 1, "W3C trace context in _meta");
    let parts: Vec<&str> = traceparents[0].split('-').collect();
    assert!(
        parts.len() == 4 && parts[0] == "00" && parts[1].len() == 32 && parts[2].len() == 16,
        "{traceparents:?}"
    );
    serve.terminate().await;
}

/// A server that says its list may change at any time is listed again (here every 300 ms,
/// `CAIRN_MCP_RELIST_MIN_MS`): a tool it stops listing leaves `GET /v1/tools` with no refresh
/// asked, and a call to it is `tool_unavailable` (a plan made before still names it), which
/// the engine takes as a stale plan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_the_server_stops_listing_leaves_the_registry_and_is_unavailable() {
    let offered = Arc::new(Mutex::new(vec!["stamp", "seal"]));
    let url = start_server(Stamper {
        calls: Arc::default(),
        offered: offered.clone(),
        traceparents: Arc::default(),
    })
    .await;
    let (_dir, tools) = tools_file(&url);
    let db = common::TestSqlite::create();
    let env = [
        ("CAIRN_TOOLS_FILE", tools.as_str()),
        ("CAIRN_MCP_RELIST_MIN_MS", "300"),
    ];
    let serve = Serve::start(Db::Sqlite(&db.path), &env).await;
    let names = || async {
        let listed: Value = reqwest::get(format!("http://{}/v1/tools", serve.addr))
            .await
            .expect("GET")
            .json()
            .await
            .expect("json");
        let items = listed["items"].as_array().cloned().unwrap_or_default();
        items
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect::<Vec<_>>()
    };
    assert_eq!(names().await, ["sdk.seal", "sdk.stamp"]);
    offered
        .lock()
        .expect("offered")
        .retain(|name| *name != "seal");
    let deadline = Instant::now() + Duration::from_secs(20);
    while names().await.contains(&"sdk.seal".to_string()) {
        assert!(Instant::now() < deadline, "sdk.seal still listed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    serve.terminate().await;

    // The client a plan made before calls through: the tool is gone, not unknown.
    let file = cairn::tools::ToolsFile::parse_toml(
        &format!("[[mcp]]\nname = \"sdk\"\nurl = \"{url}\"\n"),
        "tools.toml",
        &|_| None,
    )
    .expect("file");
    let shared = cairn::tools::SharedRegistry::new(Arc::new(file.registry.clone()));
    let catalog = Arc::new(cairn::tools::mcp::McpCatalog::new(
        cairn::tools::mcp::McpCatalogParams {
            file: file.registry,
            servers: file.mcp,
            hub: cairn::tools::mcp::McpHub::default(),
            shared: shared.clone(),
            clock: Arc::new(cairn::clock::SystemClock),
            relist_min: Duration::from_secs(30),
        },
    ));
    catalog.refresh().await;
    let client = cairn::tools::ToolClient::new(
        cairn::tools::ToolCatalog::with_mcp(shared, catalog),
        None,
        Arc::new(cairn::clock::SystemClock),
    );
    let error = client
        .call(&cairn::tools::ToolCall {
            task_id: uuid::Uuid::now_v7(),
            tool: "sdk.seal".into(),
            args: json!({"document": "doc-1"}),
            repeat: cairn::tools::Repeat::Nth(0),
            sandbox: false,
        })
        .await
        .expect_err("gone");
    assert_eq!(
        error.failure(),
        cairn::tools::ToolFailure::ToolUnavailable,
        "{error}"
    );
    assert!(
        error.to_string().contains("does not list it now"),
        "{error}"
    );
    let tools = cairn::engine::runtime::adapters::ClientTools::new(client);
    let port_error = cairn::engine::runtime::ports::ToolPort::call(
        &tools,
        cairn::engine::runtime::ports::ToolCall {
            task_id: uuid::Uuid::now_v7(),
            tool: "sdk.seal".into(),
            args: json!({"document": "doc-1"}),
            repeat: cairn::tools::Repeat::Nth(0),
        },
    )
    .await
    .expect_err("gone");
    assert_eq!(
        port_error.kind,
        cairn::engine::runtime::ports::FailureKind::Permanent,
        "a permanent failure: the plan that relies on it is stale"
    );
}
