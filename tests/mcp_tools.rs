//! MCP tool servers as cairn tools, against third-party servers (installed by
//! `scripts/install-mcp-servers.sh`, pinned): `server-everything` over streamable HTTP with its
//! `get-env` tool denied, and `server-memory` behind an HTTP wrapper as a second server, each
//! namespaced. A child `cairn serve` lists them, a scripted planner (`scenarios/mcp_tools.json`)
//! calls them, and SIGKILLs and a server killed mid-call show what is, and is not, sent again;
//! side effects are counted on the server's side.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod mcp_support;
mod serve_process;

use std::time::{Duration, Instant};

use cairn::domain::event::kinds;
use cairn::store::Store;
use cairn::store::sqlite::SqliteStore;
use mcp_support::{NodeServer, free_port};
use serde_json::{Value, json};
use serve_process::{Db, FAST_LEASES, Serve};

/// In server-everything's environment; it must never reach cairn's events or outputs.
const CANARY: &str = "canary-5e1f0a77";
/// A header secret from cairn's environment; never shown.
const TOKEN: &str = "tok-93be1c0d";
const GOAL: &str = "Add 2 and 3, echo the phrase 'cairn was here', then remember the entity \
                    'sum-fact' of type 'fact' in memory";

/// Two MCP servers, the scripted model, and the files a child `cairn serve` reads.
struct Setup {
    everything: NodeServer,
    memory: NodeServer,
    sim: cairn::sim::SimServer,
    dir: tempfile::TempDir,
    db: common::TestSqlite,
}

impl Setup {
    async fn start(memory_delay: Option<(&str, u64)>) -> Setup {
        let dir = tempfile::tempdir().expect("tempdir");
        let everything = NodeServer::everything(free_port(), &[("CAIRN_MCP_CANARY", CANARY)]).await;
        let memory =
            NodeServer::memory(free_port(), &dir.path().join("memory.jsonl"), memory_delay).await;
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/mcp_tools.json");
        let sim = cairn::sim::SimServer::start_file(&path, 0)
            .await
            .expect("simulator");
        let tools = format!(
            "[[mcp]]\nname = \"everything\"\nurl = \"{}\"\ndeny = [\"get-env\"]\n\
             headers = {{ X-Api-Token = \"${{CAIRN_TEST_MCP_TOKEN}}\" }}\n\
             side_effects = {{ echo = true }}\n\n\
             [[mcp]]\nname = \"memory\"\nurl = \"{}\"\ntimeout_ms = 20000\n",
            everything.url(),
            memory.url()
        );
        std::fs::write(dir.path().join("tools.toml"), tools).expect("tools file");
        // Transient retries 2 s apart, so a server restarted within them is found again.
        std::fs::write(
            dir.path().join("cairn.toml"),
            "[engine]\ntransient_backoff_ms = 2000\n",
        )
        .expect("config file");
        Setup {
            everything,
            memory,
            sim,
            dir,
            db: common::TestSqlite::create(),
        }
    }

    async fn serve(&self) -> Serve {
        let tools = self.dir.path().join("tools.toml").display().to_string();
        let config = self.dir.path().join("cairn.toml").display().to_string();
        let mut env: Vec<(&str, &str)> = FAST_LEASES.to_vec();
        env.extend([
            ("CAIRN_LLM_DEFAULT_BASE_URL", self.sim.base_url()),
            ("CAIRN_LLM_DEFAULT_MODEL", "cairn-sim"),
            ("CAIRN_TOOLS_FILE", tools.as_str()),
            ("CAIRN_CONFIG", config.as_str()),
            ("CAIRN_TEST_MCP_TOKEN", TOKEN),
        ]);
        Serve::start(Db::Sqlite(&self.db.path), &env).await
    }

    async fn store(&self) -> SqliteStore {
        SqliteStore::open(&self.db.path).await.expect("open")
    }

    /// The receipts and intents kept for MCP calls: `(key, tool, response)`.
    async fn receipts(&self) -> Vec<(String, String, Value)> {
        let url = format!("sqlite://{}", self.db.path.display());
        let pool = sqlx::SqlitePool::connect(&url).await.expect("sqlite");
        let rows: Vec<(String, String, String)> =
            sqlx::query_as("SELECT idempotency_key, tool, response FROM tool_receipts")
                .fetch_all(&pool)
                .await
                .expect("receipts");
        rows.into_iter()
            .map(|(key, tool, response)| {
                (key, tool, serde_json::from_str(&response).expect("json"))
            })
            .collect()
    }
}

async fn get(serve: &Serve, path: &str) -> Value {
    let response = reqwest::get(format!("http://{}{path}", serve.addr))
        .await
        .expect("GET");
    assert_eq!(response.status().as_u16(), 200, "{path}");
    response.json().await.expect("json")
}

async fn submit(serve: &Serve) -> uuid::Uuid {
    submit_goal(serve, GOAL).await
}

async fn submit_goal(serve: &Serve, goal: &str) -> uuid::Uuid {
    let response = reqwest::Client::new()
        .post(format!("http://{}/v1/tasks", serve.addr))
        .json(&json!({"goal": goal, "strategy": "v2",
                      "budget": {"tokens": 100_000, "tool_calls": 30, "wall_ms": 300_000}}))
        .send()
        .await
        .expect("POST");
    assert_eq!(response.status().as_u16(), 202);
    let task: Value = response.json().await.expect("task");
    task["id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("id")
}

/// The task's events once it ended (bounded; a timeout shows its steps and repairs).
async fn finished(store: &SqliteStore, id: uuid::Uuid) -> Vec<cairn::domain::event::Event> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let events = store
            .list_events("default", id, 0, 10_000)
            .await
            .expect("events");
        if events.iter().any(|e| kinds::is_terminal(&e.kind)) {
            return events;
        }
        let shown: Vec<(&str, &Value)> = events
            .iter()
            .filter(|e| e.kind.starts_with("step.") || e.kind.starts_with("repair."))
            .map(|e| (e.kind.as_str(), &e.data))
            .collect();
        assert!(
            Instant::now() < deadline,
            "the task did not end: {shown:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn steps(events: &[cairn::domain::event::Event]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e.kind == kinds::STEP_FINISHED)
        .map(|e| &e.data)
        .collect()
}

#[tokio::test]
#[ignore = "needs the MCP servers: scripts/install-mcp-servers.sh"]
async fn both_servers_are_listed_namespaced_with_schemas_hints_and_sources() {
    let setup = Setup::start(None).await;
    let serve = setup.serve().await;
    let listed = get(&serve, "/v1/tools").await;
    let items = listed["items"].as_array().expect("items");
    let tool = |name: &str| items.iter().find(|t| t["name"] == name).cloned();
    let sum = tool("everything.get-sum").expect("get-sum listed");
    assert_eq!(sum["side_effects"], false, "readOnlyHint: {sum:#}");
    assert_eq!(
        sum["source"],
        json!({"kind": "mcp", "server": "everything", "tool": "get-sum"})
    );
    assert_eq!(sum["args_schema"]["type"], "object");
    assert!(sum["args_schema"]["properties"]["a"].is_object(), "{sum:#}");
    assert_eq!(
        tool("everything.echo").expect("echo")["side_effects"],
        true,
        "the override wins"
    );
    let weather = tool("everything.get-structured-content").expect("structured");
    assert_eq!(
        weather["artifacts"],
        json!(["temperature", "conditions", "humidity"]),
        "outputSchema fields are declared output: {weather:#}"
    );
    assert!(
        tool("everything.get-env").is_none(),
        "denied in the registry"
    );
    assert_eq!(
        tool("memory.create_entities").expect("create")["side_effects"],
        true
    );
    assert_eq!(
        tool("memory.read_graph").expect("read")["side_effects"],
        false
    );
    let servers = listed["servers"].as_array().expect("servers");
    assert_eq!(servers.len(), 2, "{listed:#}");
    for server in servers {
        assert_eq!(server["reachable"], true, "{server:#}");
        assert!(
            server["protocol"]
                .as_str()
                .is_some_and(|p| p.starts_with("20")),
            "{server:#}"
        );
    }
    let everything = servers
        .iter()
        .find(|s| s["name"] == "everything")
        .expect("everything");
    assert_eq!(everything["headers"], json!(["X-Api-Token"]));
    assert!(
        everything["skipped"].to_string().contains("get-env"),
        "{everything:#}"
    );
    assert!(
        !listed.to_string().contains(TOKEN),
        "the header value is never shown"
    );
    // A refresh lists again; a server that went away is reported, and keeps its tools.
    setup.memory.kill().await;
    let response = reqwest::Client::new()
        .post(format!("http://{}/v1/tools/refresh", serve.addr))
        .send()
        .await
        .expect("refresh");
    assert_eq!(response.status().as_u16(), 200);
    let refreshed: Value = response.json().await.expect("json");
    let memory = refreshed["servers"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "memory").cloned())
        .expect("memory");
    assert_eq!(memory["reachable"], false, "{memory:#}");
    assert!(memory["error"].as_str().is_some(), "{memory:#}");
    serve.terminate().await;
}

#[tokio::test]
#[ignore = "needs the MCP servers: scripts/install-mcp-servers.sh"]
async fn a_planned_task_calls_tools_of_two_servers_with_receipts_for_the_writes() {
    let setup = Setup::start(None).await;
    let serve = setup.serve().await;
    let store = setup.store().await;
    let id = submit(&serve).await;
    let events = finished(&store, id).await;
    let task = get(&serve, &format!("/v1/tasks/{id}")).await;
    let steps = steps(&events);
    assert_eq!(task["status"], "succeeded", "{steps:#?}");
    let tools: Vec<&str> = steps.iter().filter_map(|s| s["tool"].as_str()).collect();
    assert_eq!(
        tools,
        [
            "everything.get-sum",
            "everything.echo",
            "memory.create_entities"
        ],
        "{steps:#?}"
    );
    assert!(steps.iter().all(|s| s["ok"] == true), "{steps:#?}");
    assert!(
        steps[0]["output"].to_string().contains('5'),
        "{:#}",
        steps[0]
    );
    assert!(
        steps[1]["output"].to_string().contains("cairn was here"),
        "{:#}",
        steps[1]
    );
    // The writes hold receipts (echo, by the registry's override; create_entities, by its
    // hint); create_entities, not idempotent, also the intent written before it was sent
    // (echo's hints call it idempotent: resending it is harmless). The read holds none.
    let receipts = setup.receipts().await;
    let kept = |tool: &str, intent: bool| {
        receipts
            .iter()
            .filter(|(key, t, _)| t == tool && key.starts_with("intent:") == intent)
            .count()
    };
    assert_eq!(kept("everything.echo", false), 1, "{receipts:#?}");
    assert_eq!(kept("everything.echo", true), 0, "{receipts:#?}");
    assert_eq!(kept("memory.create_entities", true), 1, "{receipts:#?}");
    assert_eq!(kept("memory.create_entities", false), 1, "{receipts:#?}");
    assert_eq!(kept("everything.get-sum", false), 0, "{receipts:#?}");
    assert_eq!(setup.memory.relayed("create_entities").await, 1);
    // Nothing of the server's environment, nor the header secret, reached the task's record.
    let everything_said = format!(
        "{}{}{}",
        serde_json::to_string(&events.iter().map(|e| &e.data).collect::<Vec<_>>()).expect("json"),
        task,
        get(&serve, &format!("/v1/tasks/{id}/plans")).await
    );
    assert!(!everything_said.contains(CANARY) && !everything_said.contains(TOKEN));
    serve.terminate().await;
}

/// The write is held at the server; cairn dies while it is in flight; the server performs it.
/// The restarted process finds the intent without a receipt and does not send it again: the
/// step ends `outcome_unknown`, and the repair reads the entity back instead.
#[tokio::test]
#[ignore = "needs the MCP servers: scripts/install-mcp-servers.sh"]
async fn a_sigkill_while_a_write_is_in_flight_never_sends_it_again() {
    let setup = Setup::start(Some(("create_entities", 3_000))).await;
    let store = setup.store().await;
    let first = setup.serve().await;
    let id = submit(&first).await;
    setup.memory.wait_in_flight("create_entities").await;
    first.kill().await;
    // The held call completes on the server's side: the side effect happened once.
    let deadline = Instant::now() + Duration::from_secs(30);
    while setup.memory.relayed("create_entities").await == 0 {
        assert!(Instant::now() < deadline, "the held write never completed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let second = setup.serve().await;
    let events = finished(&store, id).await;
    assert_eq!(
        setup.memory.relayed("create_entities").await,
        1,
        "sent once"
    );
    let steps = steps(&events);
    let unknown = steps
        .iter()
        .find(|s| s["tool"] == "memory.create_entities")
        .expect("the write's step after the restart");
    assert_eq!(unknown["ok"], false, "{unknown:#}");
    assert!(
        unknown["error"]
            .as_str()
            .is_some_and(|e| e.contains("does not send it again")),
        "{unknown:#}"
    );
    assert!(
        steps
            .iter()
            .any(|s| s["tool"] == "memory.open_nodes" && s["ok"] == true),
        "the repair read the entity back: {steps:#?}"
    );
    let task = get(&second, &format!("/v1/tasks/{id}")).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    second.terminate().await;
}

/// A SIGKILL as soon as the write's answer is kept: whether the step's commit landed or not,
/// the restarted process answers the write from its receipt, or finds it done, and never
/// sends it again.
#[tokio::test]
#[ignore = "needs the MCP servers: scripts/install-mcp-servers.sh"]
async fn a_sigkill_after_the_answer_is_kept_never_sends_it_again() {
    let setup = Setup::start(None).await;
    let store = setup.store().await;
    let first = setup.serve().await;
    let id = submit(&first).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let receipts = setup.receipts().await;
        if receipts
            .iter()
            .any(|(key, tool, _)| tool == "memory.create_entities" && !key.starts_with("intent:"))
        {
            break;
        }
        assert!(Instant::now() < deadline, "no receipt for the write");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    first.kill().await;
    let second = setup.serve().await;
    finished(&store, id).await;
    assert_eq!(
        setup.memory.relayed("create_entities").await,
        1,
        "sent once"
    );
    let task = get(&second, &format!("/v1/tasks/{id}")).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    second.terminate().await;
}

/// A read whose server dies mid-call is a transient failure: retried unchanged, it succeeds
/// once the server is back.
#[tokio::test]
#[ignore = "needs the MCP servers: scripts/install-mcp-servers.sh"]
async fn a_read_whose_server_dies_mid_call_is_retried_when_it_is_back() {
    let mut setup = Setup::start(None).await;
    let serve = setup.serve().await;
    let store = setup.store().await;
    // The read of m1, held at server-everything: its long-running operation (read-only).
    let port = setup.everything.port;
    let id = submit_goal(&serve, "Run the long operation for 3 seconds in 3 steps").await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    setup.everything.stop().await;
    let back = NodeServer::everything(port, &[("CAIRN_MCP_CANARY", CANARY)]).await;
    let events = finished(&store, id).await;
    let task = get(&serve, &format!("/v1/tasks/{id}")).await;
    assert_eq!(task["status"], "succeeded", "{task:#}");
    let retried = events
        .iter()
        .filter(|e| e.kind == "repair.started" && e.data["unchanged"] == true)
        .count();
    assert!(retried >= 1, "the read was retried: {:#?}", steps(&events));
    drop(back);
    serve.terminate().await;
}
