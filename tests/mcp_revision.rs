//! The MCP 2026-07-28 revision (no session, no `initialize`: `server/discover`, then every
//! request self-contained), against the official Rust SDK's own server, since no npm server
//! speaks it yet: a child `cairn serve` lists its tool on that revision, and a planned task
//! (`scenarios/mcp_tools.json`, goal `doc-7q2`) calls it once, with a receipt; the server
//! counts the calls.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod serve_process;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// One writing tool, `stamp`, counted.
#[derive(Clone)]
struct Stamper {
    calls: Arc<AtomicUsize>,
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
        Ok(serde_json::from_value(json!({"tools": [{
            "name": "stamp",
            "description": "Stamps a document as approved; answers the stamp id",
            "inputSchema": {"type": "object", "required": ["document"],
                            "properties": {"document": {"type": "string"}}},
            "outputSchema": {"type": "object", "properties": {"stamp": {"type": "string"}}},
            "annotations": {"destructiveHint": false}
        }]}))
        .expect("tools"))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
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

async fn start_server(calls: Arc<AtomicUsize>) -> String {
    let config = StreamableHttpServerConfig::default().with_legacy_session_mode(false);
    let service: StreamableHttpService<Stamper, LocalSessionManager> = StreamableHttpService::new(
        move || {
            Ok(Stamper {
                calls: calls.clone(),
            })
        },
        Default::default(),
        config,
    );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_on_the_2026_07_28_revision_is_listed_and_called_once() {
    let calls = Arc::new(AtomicUsize::new(0));
    let url = start_server(calls.clone()).await;
    let scenario =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/mcp_tools.json");
    let sim = cairn::sim::SimServer::start_file(&scenario, 0)
        .await
        .expect("simulator");
    let dir = tempfile::tempdir().expect("tempdir");
    let tools = dir.path().join("tools.toml");
    std::fs::write(
        &tools,
        format!("[[mcp]]\nname = \"sdk\"\nurl = \"{url}\"\n"),
    )
    .expect("file");
    let db = common::TestSqlite::create();
    let tools = tools.display().to_string();
    let mut env: Vec<(&str, &str)> = FAST_LEASES.to_vec();
    env.extend([
        ("CAIRN_LLM_DEFAULT_BASE_URL", sim.base_url()),
        ("CAIRN_LLM_DEFAULT_MODEL", "cairn-sim"),
        ("CAIRN_TOOLS_FILE", tools.as_str()),
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
    serve.terminate().await;
}
