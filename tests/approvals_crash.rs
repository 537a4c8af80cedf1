//! A task waiting for a sign-off survives `cairn serve` being SIGKILLed: while it waits it holds
//! no lease (its status is `awaiting_approval`, which the schema allows only without one), a
//! restarted process refuses a stale digest with 409, and the right decision resumes the task,
//! whose approved call runs exactly once. The wait is charged to no budget.
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
use std::time::{Duration, Instant};

use cairn::domain::task::{DEFAULT_TENANT, TaskStatus};
use cairn::store::Store;
use cairn::store::postgres::PgStore;
use cairn::store::sqlite::SqliteStore;
use serde_json::{Value, json};
use serve_process::{Db, Serve, SimStack};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_task_survives_sigkill_and_its_approved_call_runs_once_on_postgres() {
    let pg = common::TestPg::create().await;
    let store = PgStore::connect(&pg.url, 2).await.expect("connect");
    store.migrate().await.expect("migrate");
    killed_while_waiting(Db::Postgres(&pg.url), &store).await;
    drop(store);
    pg.drop_database().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_task_survives_sigkill_and_its_approved_call_runs_once_on_sqlite() {
    let db = common::TestSqlite::create();
    let store = SqliteStore::open(&db.path).await.expect("open");
    store.migrate().await.expect("migrate");
    killed_while_waiting(Db::Sqlite(&db.path), &store).await;
}

async fn approvals(addr: SocketAddr, id: &str) -> Vec<Value> {
    let list: Value = reqwest::get(format!("http://{addr}/v1/tasks/{id}/approvals"))
        .await
        .expect("GET approvals")
        .json()
        .await
        .expect("json");
    list["items"].as_array().cloned().unwrap_or_default()
}

async fn decide(addr: SocketAddr, id: &str, approval: u64, digest: &Value) -> u16 {
    reqwest::Client::new()
        .post(format!("http://{addr}/v1/tasks/{id}/approvals/{approval}"))
        .json(&json!({"decision": "approve", "digest": digest}))
        .send()
        .await
        .expect("POST approval")
        .status()
        .as_u16()
}

/// Waits until the task waits on its `n`th request (bounded), and returns it.
async fn waiting_on(store: &dyn Store, addr: SocketAddr, id: &str, n: usize) -> Value {
    let uuid: uuid::Uuid = id.parse().expect("uuid");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let task = store
            .get_task(DEFAULT_TENANT, uuid)
            .await
            .expect("get")
            .expect("task");
        let items = approvals(addr, id).await;
        if task.status == TaskStatus::AwaitingApproval && items.len() == n {
            return items[n - 1].clone();
        }
        assert!(
            !task.status.is_terminal(),
            "ended instead: {:?}",
            task.result
        );
        assert!(Instant::now() < deadline, "never waited on request {n}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn killed_while_waiting(db: Db<'_>, store: &dyn Store) {
    let sim = SimStack::start("approvals.json", &[], 0).await;
    let env = sim.env();
    let first = Serve::start(db, &env).await;
    let response = reqwest::Client::new()
        .post(format!("http://{}/v1/tasks", first.addr))
        .json(
            &json!({"goal": "Fetch the prices, write them in a note and publish it",
            "strategy": "v2", "approval": "steps",
            "budget": {"tokens": 100_000, "tool_calls": 50, "wall_ms": 600_000}}),
        )
        .send()
        .await
        .expect("POST /v1/tasks");
    assert_eq!(response.status().as_u16(), 202);
    let task: Value = response.json().await.expect("task");
    let id = task["id"].as_str().expect("id").to_string();

    let request = waiting_on(store, first.addr, &id, 1).await;
    let waited = Instant::now();
    first.kill().await;
    let tools = sim.sim.stats().tools;
    assert_eq!(tools.get("write_note").map_or(0, |t| t.calls), 0);

    let second = Serve::start(db, &env).await;
    // Still waiting after the restart, on the same request: nothing claimed it.
    let again = waiting_on(store, second.addr, &id, 1).await;
    assert_eq!(again["digest"], request["digest"]);
    assert_eq!(again["state"], "pending");
    let stale = json!("f".repeat(64));
    assert_eq!(decide(second.addr, &id, 1, &stale).await, 409);
    assert_eq!(decide(second.addr, &id, 1, &request["digest"]).await, 200);
    // The publish call waits on its own request; sign off every one until the task ends.
    for n in 2..=3 {
        let next = waiting_on(store, second.addr, &id, n).await;
        assert_eq!(
            decide(second.addr, &id, n as u64, &next["digest"]).await,
            200
        );
        if next["request"]["calls"][0]["args"]["channel"] == "ops" {
            break;
        }
    }
    let waited_ms = waited.elapsed().as_millis() as u64;
    let uuid: uuid::Uuid = id.parse().expect("uuid");
    let deadline = Instant::now() + Duration::from_secs(60);
    let task = loop {
        let task = store
            .get_task(DEFAULT_TENANT, uuid)
            .await
            .expect("get")
            .expect("task");
        if task.status.is_terminal() {
            break task;
        }
        assert!(Instant::now() < deadline, "the task never ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let result = task.result.clone().unwrap_or_default();
    assert_eq!(task.status, TaskStatus::Succeeded, "{result:#}");
    let stats = sim.sim.stats();
    assert_eq!(
        stats.tools["write_note"].calls, 1,
        "the approved write ran once"
    );
    // The time spent waiting (a restart included) is on no budget.
    let spent = result["spend"]["wall_ms"].as_u64().expect("wall spend");
    assert!(
        spent < waited_ms,
        "wall spend {spent} ms includes the {waited_ms} ms wait"
    );
    second.kill().await;
}
