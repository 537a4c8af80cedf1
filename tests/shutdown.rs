//! Graceful shutdown: SIGTERM mid-task makes `cairn serve` bring the task to a durable point,
//! release its lease and exit 0; a new process then finishes the task. In-process, an engine
//! that ignores the stop request is cut off after the grace period and its task still released.
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
use std::time::Duration;

use async_trait::async_trait;
use cairn::clock::SystemClock;
use cairn::domain::event::kinds;
use cairn::domain::task::{DEFAULT_TENANT, TaskStatus};
use cairn::engine::{Engine, EngineError, RunContext, RunOutcome};
use cairn::store::Store;
use cairn::store::postgres::PgStore;
use cairn::worker::{PoolParams, WorkerPool, process_worker_id};
use serve_process::{Db, FAST_LEASES, Serve, count, get_task, post_task, submit, wait_events};
use sqlx::Row;

/// The lease columns as stored: a released task must have none.
async fn lease_columns(url: &str, id: uuid::Uuid) -> (Option<String>, bool) {
    let pool = sqlx::PgPool::connect(url).await.expect("connect");
    let row = sqlx::query(
        "SELECT claimed_by, lease_expires_at IS NOT NULL AS leased FROM tasks WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .expect("task row");
    let columns = (row.get("claimed_by"), row.get("leased"));
    pool.close().await;
    columns
}

#[tokio::test]
async fn sigterm_mid_task_releases_it_and_exits_zero_then_another_process_finishes_it() {
    let db = common::TestPg::create().await;
    let store = PgStore::connect(&db.url, 2).await.expect("connect");
    store.migrate().await.expect("migrate");

    let first = Serve::start(Db::Postgres(&db.url), FAST_LEASES).await;
    let id = submit(&store, 20, 300).await;
    wait_events(&store, id, "a committed step", |events| {
        count(events, kinds::ENGINE_STEP) >= 1
    })
    .await;
    assert_eq!(first.terminate().await, Some(0), "clean exit after SIGTERM");

    let task = store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(task.status, TaskStatus::Queued);
    assert_eq!(lease_columns(&db.url, id).await, (None, false));
    let released = store
        .list_events(DEFAULT_TENANT, id, 0, 10_000)
        .await
        .expect("events");
    assert_eq!(
        released.last().map(|e| e.kind.as_str()),
        Some(kinds::TASK_RELEASED)
    );
    assert_eq!(count(&released, kinds::TASK_LEASE_EXPIRED), 0);
    let steps_before = count(&released, kinds::ENGINE_STEP);

    let second = Serve::start(Db::Postgres(&db.url), FAST_LEASES).await;
    let events = wait_events(&store, id, "task.succeeded", |events| {
        events.iter().any(|e| e.kind == kinds::TASK_SUCCEEDED)
    })
    .await;
    assert_eq!(&events[..released.len()], &released[..]);
    let steps: Vec<u64> = events
        .iter()
        .filter(|e| e.kind == kinds::ENGINE_STEP)
        .filter_map(|e| e.data["index"].as_u64())
        .collect();
    assert_eq!(steps, (1..=20).collect::<Vec<u64>>());
    // The second attempt picked up right after the last step committed before shutdown.
    let resumed = events
        .iter()
        .find(|e| e.kind == kinds::ENGINE_STEP && e.data["attempt"] == 2)
        .and_then(|e| e.data["index"].as_u64());
    assert_eq!(resumed, Some(steps_before as u64 + 1));
    let task = store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!((task.status, task.attempts), (TaskStatus::Succeeded, 2));

    assert_eq!(second.terminate().await, Some(0));
    db.drop_database().await;
}

/// Never reaches a durable point on its own: it ignores the stop request.
struct Stubborn;

#[async_trait]
impl Engine for Stubborn {
    async fn run(&self, _ctx: RunContext) -> Result<RunOutcome, EngineError> {
        std::future::pending::<()>().await;
        Ok(RunOutcome::Yielded)
    }
}

#[tokio::test]
async fn an_engine_that_overruns_the_grace_period_is_cut_off_and_its_task_released() {
    let db = common::TestPg::create().await;
    let store: Arc<dyn Store> = Arc::new(PgStore::connect(&db.url, 4).await.expect("connect"));
    store.migrate().await.expect("migrate");
    let pool = WorkerPool::start(PoolParams {
        store: store.clone(),
        engine: Arc::new(Stubborn),
        clock: Arc::new(SystemClock),
        worker_id: process_worker_id(),
        workers: 2,
        max_running_per_tenant: None,
        lease_ttl: Duration::from_secs(30),
        heartbeat: Duration::from_millis(100),
        poll_interval: Duration::from_millis(50),
        meters: cairn::meters::Meters::new(),
        spend_caps: Default::default(),
    });
    let id = submit(store.as_ref(), 1, 0).await;
    wait_events(store.as_ref(), id, "the claim", |events| {
        count(events, kinds::TASK_CLAIMED) == 1
    })
    .await;

    let report = pool.shutdown(Duration::from_millis(200)).await;
    assert!(!report.drained, "the stubborn engine cannot drain");
    let task = store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(task.status, TaskStatus::Queued);
    assert_eq!(lease_columns(&db.url, id).await, (None, false));
    let events = store
        .list_events(DEFAULT_TENANT, id, 0, 100)
        .await
        .expect("events");
    assert_eq!(
        events.last().map(|e| e.kind.as_str()),
        Some(kinds::TASK_RELEASED)
    );
    db.drop_database().await;
}

/// The embedded default end to end: the SQLite path is printed at start, a task POSTed over
/// HTTP finishes, and SIGTERM on an idle server exits 0.
#[tokio::test]
async fn serve_on_the_embedded_sqlite_default_prints_its_path_runs_a_task_and_exits_zero() {
    let db = common::TestSqlite::create();
    let serve = Serve::start(Db::Sqlite(&db.path), FAST_LEASES).await;
    let shown = std::fs::canonicalize(&db.path).expect("the file was created");
    assert!(
        serve
            .banner
            .iter()
            .any(|line| line.contains("SQLite") && line.contains(&*shown.to_string_lossy())),
        "{:?}",
        serve.banner
    );
    let id = post_task(serve.addr, 2, 10).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let task = get_task(serve.addr, id).await;
        if task["status"] == "succeeded" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task not finished: {task}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(serve.terminate().await, Some(0));
}

/// The signal handlers are installed before the listening line is printed, so a SIGTERM sent
/// the moment a supervisor sees that line is a clean shutdown, not a kill.
#[tokio::test]
async fn sigterm_right_after_start_is_a_clean_exit() {
    let db = common::TestSqlite::create();
    let serve = Serve::start(Db::Sqlite(&db.path), FAST_LEASES).await;
    assert_eq!(serve.terminate().await, Some(0));
}
