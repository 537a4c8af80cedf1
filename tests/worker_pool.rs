//! The worker pool end to end against real stores: tasks submitted through the store run to
//! `succeeded` on SQLite and on Postgres, and two pools ("processes", each with its own
//! `PgStore`) sharing one database never run one task at once.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use cairn::clock::{Clock, SystemClock};
use cairn::domain::event::{Event, kinds};
use cairn::domain::task::{Budget, DEFAULT_TENANT, NewTask, Strategy, Task, TaskId, TaskStatus};
use cairn::engine::minimal::MinimalEngine;
use cairn::store::Store;
use cairn::store::postgres::PgStore;
use cairn::store::sqlite::SqliteStore;
use cairn::worker::{PoolParams, WorkerPool, process_worker_id};
use serde_json::json;

fn pool_params(store: Arc<dyn Store>, workers: usize) -> PoolParams {
    PoolParams {
        store,
        engine: Arc::new(MinimalEngine::default()),
        clock: Arc::new(SystemClock),
        worker_id: process_worker_id(),
        workers,
        lease_ttl: Duration::from_secs(30),
        heartbeat: Duration::from_millis(500),
        poll_interval: Duration::from_millis(200),
    }
}

async fn submit(store: &dyn Store, count: usize, steps: u64, step_ms: u64) -> Vec<TaskId> {
    let mut ids = Vec::new();
    for n in 0..count {
        let new = NewTask {
            id: uuid::Uuid::now_v7(),
            tenant_id: DEFAULT_TENANT.to_string(),
            goal: format!("pool test task {n}"),
            strategy: Strategy::Auto,
            budget: Budget {
                tokens: 1000,
                tool_calls: 10,
                wall_ms: 600_000,
            },
            metadata: json!({ "engine_steps": steps, "engine_step_ms": step_ms }),
        };
        let created = store
            .create_task(new, None, SystemClock.now())
            .await
            .expect("create task");
        ids.push(created.task.id);
    }
    ids
}

/// Polls until every task is terminal (bounded), then returns them.
async fn wait_terminal(store: &dyn Store, ids: &[TaskId]) -> Vec<Task> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut tasks = Vec::new();
        for id in ids {
            let task = store
                .get_task(DEFAULT_TENANT, *id)
                .await
                .expect("get task")
                .expect("task exists");
            tasks.push(task);
        }
        if tasks.iter().all(|task| task.status.is_terminal()) {
            return tasks;
        }
        let pending = tasks.iter().filter(|t| !t.status.is_terminal()).count();
        assert!(
            tokio::time::Instant::now() < deadline,
            "{pending} tasks still not terminal after 60s"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn events(store: &dyn Store, id: TaskId) -> Vec<Event> {
    store.list_events(id, 0, 10_000).await.expect("events")
}

/// The single-owner invariants, read from a finished task's history:
/// seqs are dense from 1; every step index 1..=steps is committed exactly once; claim fences
/// strictly grow; every step was written under the lease of the latest claim before it.
/// Returns the worker ids that claimed the task.
fn check_history(task: &Task, events: &[Event], steps: u64) -> Vec<String> {
    let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    let dense: Vec<i64> = (1..=events.len() as i64).collect();
    assert_eq!(seqs, dense, "task {}: seqs not dense", task.id);
    assert_eq!(task.last_seq, events.len() as i64);

    let mut claimers = Vec::new();
    let mut current_fence: Option<i64> = None;
    let mut step_indexes = Vec::new();
    for event in events {
        match event.kind.as_str() {
            kinds::TASK_CLAIMED => {
                let fence = event.data["fence"].as_i64().expect("claim fence");
                if let Some(previous) = current_fence {
                    assert!(fence > previous, "task {}: fence went back", task.id);
                }
                current_fence = Some(fence);
                claimers.push(event.data["worker_id"].as_str().unwrap_or("").to_string());
            }
            kinds::ENGINE_STEP => {
                let fence = event.data["fence"].as_i64().expect("step fence");
                assert_eq!(
                    Some(fence),
                    current_fence,
                    "task {}: step written under a stale lease",
                    task.id
                );
                step_indexes.push(event.data["index"].as_u64().expect("step index"));
            }
            _ => {}
        }
    }
    let expected: Vec<u64> = (1..=steps).collect();
    assert_eq!(
        step_indexes, expected,
        "task {}: each step exactly once",
        task.id
    );
    assert_eq!(
        events.last().map(|e| e.kind.as_str()),
        Some(kinds::TASK_SUCCEEDED)
    );
    claimers
}

async fn run_to_success(store: Arc<dyn Store>) {
    let pool = WorkerPool::start(pool_params(store.clone(), 3));
    let ids = submit(store.as_ref(), 6, 3, 5).await;
    let tasks = wait_terminal(store.as_ref(), &ids).await;
    for task in &tasks {
        assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
        assert_eq!(task.attempts, 1);
        assert_eq!(
            task.result.as_ref().map(|r| r["steps"].clone()),
            Some(json!(3))
        );
        assert!(task.finished_at.is_some());
        check_history(task, &events(store.as_ref(), task.id).await, 3);
    }
    let report = pool.shutdown(Duration::from_secs(5)).await;
    assert!(report.drained);
}

#[tokio::test]
async fn tasks_run_to_succeeded_on_sqlite() {
    let db = common::TestSqlite::create();
    let store = SqliteStore::open(&db.path).await.expect("open sqlite");
    store.migrate().await.expect("migrate");
    run_to_success(Arc::new(store)).await;
}

#[tokio::test]
async fn tasks_run_to_succeeded_on_postgres() {
    let db = common::TestPg::create().await;
    let store = PgStore::connect(&db.url, 8).await.expect("connect");
    store.migrate().await.expect("migrate");
    run_to_success(Arc::new(store)).await;
    db.drop_database().await;
}

#[tokio::test]
async fn two_pools_on_one_postgres_never_run_one_task_at_once() {
    let db = common::TestPg::create().await;
    let first: Arc<dyn Store> = Arc::new(PgStore::connect(&db.url, 8).await.expect("connect"));
    first.migrate().await.expect("migrate");
    let second: Arc<dyn Store> = Arc::new(PgStore::connect(&db.url, 8).await.expect("connect"));
    let pool_a_params = pool_params(first.clone(), 4);
    let pool_b_params = pool_params(second.clone(), 4);
    let (id_a, id_b) = (
        pool_a_params.worker_id.clone(),
        pool_b_params.worker_id.clone(),
    );
    let pool_a = WorkerPool::start(pool_a_params);
    let pool_b = WorkerPool::start(pool_b_params);

    const TASKS: usize = 40;
    const STEPS: u64 = 3;
    let ids = submit(first.as_ref(), TASKS, STEPS, 5).await;
    let tasks = wait_terminal(first.as_ref(), &ids).await;

    let mut claimers = HashSet::new();
    for task in &tasks {
        assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
        // Leases are long here, so nothing expired: one claim per task, by exactly one pool.
        assert_eq!(task.attempts, 1, "task {} claimed twice", task.id);
        let history = events(second.as_ref(), task.id).await;
        let who = check_history(task, &history, STEPS);
        assert_eq!(who.len(), 1);
        claimers.extend(who);
    }
    assert!(
        claimers.contains(&id_a) && claimers.contains(&id_b),
        "both pools should have claimed work: {claimers:?}"
    );
    assert!(pool_a.shutdown(Duration::from_secs(5)).await.drained);
    assert!(pool_b.shutdown(Duration::from_secs(5)).await.drained);
    db.drop_database().await;
}
