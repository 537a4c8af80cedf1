//! The per-tenant cap on running tasks through the real `cairn serve`
//! (`CAIRN_MAX_RUNNING_PER_TENANT=1`, three workers): tenant `acme` submits two tasks, then
//! `globex` one. acme's second task stays `queued` (with a free worker idle) while globex's,
//! newer than it, runs; nothing is refused at submit. Cancelling acme's running task frees
//! the slot and its queued task runs.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod serve_process;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use cairn::store::Store;
use cairn::store::keys::{Scope, generate_key};
use cairn::store::postgres::PgStore;
use cairn::store::sqlite::SqliteStore;
use serde_json::{Value, json};
use serve_process::{Db, FAST_LEASES, Serve};

/// Stores a key of `tenant` that may submit and read; returns the bearer token.
async fn key(store: &dyn Store, tenant: &str) -> String {
    let generated =
        generate_key(tenant, vec![Scope::Read, Scope::Submit], None).expect("generate key");
    store
        .create_api_key(generated.new, chrono::Utc::now())
        .await
        .expect("store key");
    generated.token.expose().to_string()
}

struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    /// Submits a task on the minimal test engine: `steps` steps of 50 ms.
    async fn submit(&self, key: &str, steps: u64) -> String {
        let response = self
            .http
            .post(format!("{}/v1/tasks", self.base))
            .bearer_auth(key)
            .json(&json!({
                "goal": "share the workers",
                "budget": {"tokens": 1000, "tool_calls": 10, "wall_ms": 600_000},
                "metadata": {"engine_steps": steps, "engine_step_ms": 50},
            }))
            .send()
            .await
            .expect("POST /v1/tasks");
        assert_eq!(
            response.status(),
            202,
            "a capped tenant's submission is accepted"
        );
        let task: Value = response.json().await.expect("task JSON");
        assert_eq!(task["status"], "queued");
        task["id"].as_str().expect("task id").to_string()
    }

    async fn task(&self, key: &str, id: &str) -> Value {
        let response = self
            .http
            .get(format!("{}/v1/tasks/{id}", self.base))
            .bearer_auth(key)
            .send()
            .await
            .expect("GET /v1/tasks/{id}");
        assert_eq!(response.status(), 200);
        response.json().await.expect("task JSON")
    }

    /// Polls the task until its status is one of `wanted` (bounded); returns the task.
    async fn wait_status(&self, key: &str, id: &str, wanted: &[&str]) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let task = self.task(key, id).await;
            if wanted.iter().any(|status| task["status"] == *status) {
                return task;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "task {id} never reached {wanted:?}: {task}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn cancel(&self, key: &str, id: &str) {
        let response = self
            .http
            .post(format!("{}/v1/tasks/{id}/cancel", self.base))
            .bearer_auth(key)
            .send()
            .await
            .expect("POST cancel");
        assert_eq!(response.status(), 200, "cancel {id}");
    }

    async fn event_kinds(&self, key: &str, id: &str) -> Vec<String> {
        let response = self
            .http
            .get(format!("{}/v1/tasks/{id}/events", self.base))
            .bearer_auth(key)
            .header("accept", "application/json")
            .send()
            .await
            .expect("GET events");
        assert_eq!(response.status(), 200);
        let page: Value = response.json().await.expect("events JSON");
        page["items"]
            .as_array()
            .expect("an event page")
            .iter()
            .map(|event| event["kind"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

async fn a_tenant_at_its_cap_waits_while_another_runs(db: Db<'_>, store: Arc<dyn Store>) {
    store.migrate().await.expect("migrate");
    let acme = key(store.as_ref(), "acme").await;
    let globex = key(store.as_ref(), "globex").await;
    let mut env = FAST_LEASES.to_vec();
    env.extend([
        ("CAIRN_WORKERS", "3"),
        ("CAIRN_MAX_RUNNING_PER_TENANT", "1"),
    ]);
    let serve = Serve::start(db, &env).await;
    let client = client(serve.addr);

    let acme_running = client.submit(&acme, 1000).await;
    client.wait_status(&acme, &acme_running, &["running"]).await;
    let acme_waiting = client.submit(&acme, 2).await;
    let globex_running = client.submit(&globex, 1000).await;
    client
        .wait_status(&globex, &globex_running, &["running"])
        .await;

    // Workers claim oldest first: globex's task ran past acme's older one, and a third worker
    // sat idle beside it. Three more poll rounds change nothing.
    for _ in 0..3 {
        let waiting = client.task(&acme, &acme_waiting).await;
        assert_eq!(waiting["status"], "queued", "{waiting}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(client.task(&acme, &acme_running).await["status"], "running");
    assert_eq!(
        client.event_kinds(&acme, &acme_waiting).await,
        vec!["task.created".to_string()],
        "never claimed while acme was at its cap"
    );

    // A slot frees when acme's running task ends; its queued task then runs to the end.
    client.cancel(&acme, &acme_running).await;
    let done = client
        .wait_status(&acme, &acme_waiting, &["succeeded"])
        .await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(
        client.task(&globex, &globex_running).await["status"],
        "running"
    );
    client.cancel(&globex, &globex_running).await;
    assert_eq!(serve.terminate().await, Some(0));
}

fn client(addr: SocketAddr) -> Client {
    Client {
        http: reqwest::Client::new(),
        base: format!("http://{addr}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_at_its_cap_waits_while_another_runs_on_sqlite() {
    let db = common::TestSqlite::create();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&db.path).await.expect("open"));
    a_tenant_at_its_cap_waits_while_another_runs(Db::Sqlite(&db.path), store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_at_its_cap_waits_while_another_runs_on_postgres() {
    let db = common::TestPg::create().await;
    let store: Arc<dyn Store> = Arc::new(PgStore::connect(&db.url, 2).await.expect("connect"));
    a_tenant_at_its_cap_waits_while_another_runs(Db::Postgres(&db.url), store).await;
    db.drop_database().await;
}
