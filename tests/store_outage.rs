//! A database restart in the middle of a run fails no task: the test puts a TCP proxy it
//! controls between a child `cairn serve` and PostgreSQL, cuts every connection and closes the
//! port for three seconds while v2 tasks (the worked example) are running, then opens it
//! again. Every task must end `succeeded`; a task whose commit failed is handed back to the
//! queue (`task.released`, reason `store_fault`) and resumes from its last commit.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod fault_proxy;
mod serve_process;

use std::net::SocketAddr;
use std::time::Duration;

use cairn::domain::event::kinds;
use cairn::domain::task::{DEFAULT_TENANT, TaskId, TaskStatus};
use cairn::store::Store;
use cairn::store::postgres::PgStore;
use fault_proxy::FaultProxy;
use serde_json::json;
use serve_process::{Db, Serve, SimStack};

const TASKS: usize = 4;
/// About what a PostgreSQL restart takes on this machine.
const OUTAGE: Duration = Duration::from_secs(3);

/// The test database's URL with its host and port replaced by the proxy's.
fn through(url: &str, proxy: SocketAddr) -> (String, SocketAddr) {
    let mut parsed = reqwest::Url::parse(url).expect("database url");
    let host = parsed.host_str().expect("host").to_string();
    let port = parsed.port().unwrap_or(5432);
    let upstream = format!("{host}:{port}")
        .parse::<SocketAddr>()
        .expect("upstream is an IP address");
    parsed.set_port(Some(proxy.port())).expect("port");
    parsed.set_host(Some("127.0.0.1")).expect("host");
    (parsed.to_string(), upstream)
}

fn upstream_of(url: &str) -> SocketAddr {
    through(url, "127.0.0.1:1".parse().expect("addr")).1
}

async fn post(addr: SocketAddr) -> TaskId {
    let response = reqwest::Client::new()
        .post(format!("http://{addr}/v1/tasks"))
        .json(
            &json!({"goal": "Rename config key db.url to db.dsn in services A, B, C",
                      "budget": {"tokens": 200_000, "tool_calls": 100, "wall_ms": 600_000}}),
        )
        .send()
        .await
        .expect("POST /v1/tasks");
    assert_eq!(response.status().as_u16(), 202);
    let task: serde_json::Value = response.json().await.expect("task");
    task["id"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("id")
}

async fn statuses(store: &dyn Store, ids: &[TaskId]) -> Vec<TaskStatus> {
    let mut out = Vec::new();
    for id in ids {
        let task = store.get_task(DEFAULT_TENANT, *id).await.expect("get");
        out.push(task.expect("task").status);
    }
    out
}

async fn steps_done(store: &dyn Store, ids: &[TaskId]) -> usize {
    let mut total = 0;
    for id in ids {
        let events = store
            .list_events(DEFAULT_TENANT, *id, 0, 10_000)
            .await
            .expect("events");
        total += events
            .iter()
            .filter(|e| e.kind == kinds::STEP_FINISHED)
            .count();
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restart_mid_run_fails_no_task() {
    let pg = common::TestPg::create().await;
    // The test reads the database directly, around the proxy.
    let store = PgStore::connect(&pg.url, 2).await.expect("connect");
    store.migrate().await.expect("migrate");
    let proxy = FaultProxy::start(upstream_of(&pg.url)).await;
    let (proxied, _) = through(&pg.url, proxy.addr());

    let stack = SimStack::start("worked_example.json", &["edit_file"], 300).await;
    let env = stack.env();
    let serve = Serve::start(Db::Postgres(&proxied), &env).await;
    let mut ids = Vec::new();
    for _ in 0..TASKS {
        ids.push(post(serve.addr).await);
    }

    // Cut the database away once work is under way.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while steps_done(&store, &ids).await < 2 {
        assert!(tokio::time::Instant::now() < deadline, "no step ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    proxy.cut();
    let at_cut = statuses(&store, &ids).await;
    tokio::time::sleep(OUTAGE).await;
    proxy.restore();
    let unfinished_at_cut = at_cut.iter().filter(|s| !s.is_terminal()).count();
    assert!(
        unfinished_at_cut > 0,
        "every task had finished before the outage; make them slower"
    );

    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let finished = loop {
        let now = statuses(&store, &ids).await;
        if now.iter().all(|s| s.is_terminal()) {
            break now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "tasks did not finish after the outage: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut released = 0;
    for id in &ids {
        let events = store
            .list_events(DEFAULT_TENANT, *id, 0, 10_000)
            .await
            .expect("events");
        released += events
            .iter()
            .filter(|e| e.kind == kinds::TASK_RELEASED && e.data["reason"] == "store_fault")
            .count();
        let task = store.get_task(DEFAULT_TENANT, *id).await.expect("get");
        let task = task.expect("task");
        assert_eq!(
            task.status,
            TaskStatus::Succeeded,
            "task {id}: {:#}",
            task.result.unwrap_or_default()
        );
    }
    eprintln!(
        "outage {} ms with {unfinished_at_cut}/{TASKS} tasks unfinished: {finished:?}, \
         {released} released for a store fault",
        OUTAGE.as_millis()
    );
    drop(serve);
    drop(store);
    pg.drop_database().await;
}
