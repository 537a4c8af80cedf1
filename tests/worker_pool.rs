//! The worker pool end to end against real stores: tasks submitted through the store run to
//! `succeeded` on SQLite and on Postgres, and two pools ("processes", each with its own
//! `PgStore`) sharing one database never run one task at once.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;
mod serve_process;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use cairn::clock::{Clock, SystemClock};
use cairn::domain::event::{Event, kinds};
use cairn::domain::task::{Budget, DEFAULT_TENANT, NewTask, Strategy, Task, TaskId, TaskStatus};
use cairn::engine::minimal::MinimalEngine;
use cairn::engine::{Engine, EngineError, RunContext, RunOutcome};
use cairn::store::Store;
use cairn::store::postgres::PgStore;
use cairn::store::sqlite::SqliteStore;
use cairn::worker::{PoolParams, WorkerPool, process_worker_id};
use serde_json::json;
use serve_process::{Db, Serve, post_task};

fn pool_params(store: Arc<dyn Store>, workers: usize) -> PoolParams {
    PoolParams {
        store,
        engine: Arc::new(MinimalEngine::default()),
        clock: Arc::new(SystemClock),
        worker_id: process_worker_id(),
        workers,
        max_running_per_tenant: None,
        lease_ttl: Duration::from_secs(30),
        heartbeat: Duration::from_millis(500),
        poll_interval: Duration::from_millis(200),
        meters: cairn::meters::Meters::new(),
        spend_caps: Default::default(),
    }
}

async fn submit(store: &dyn Store, count: usize, steps: u64, step_ms: u64) -> Vec<TaskId> {
    let mut ids = Vec::new();
    for n in 0..count {
        let new = NewTask {
            tools: None,
            id: uuid::Uuid::now_v7(),
            tenant_id: DEFAULT_TENANT.to_string(),
            goal: format!("pool test task {n}"),
            strategy: Strategy::Auto,
            budget: Budget {
                tokens: 1000,
                tool_calls: 10,
                wall_ms: 600_000,
                cost: None,
            },
            metadata: json!({ "engine_steps": steps, "engine_step_ms": step_ms }),
            approval: Default::default(),
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
    store
        .list_events(DEFAULT_TENANT, id, 0, 10_000)
        .await
        .expect("events")
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

/// With polling effectively off (one hour), only the store's runnable hint can get an idle
/// worker to a new task: NOTIFY on Postgres (here sent through a second store, as from another
/// replica), the in-process channel on SQLite.
async fn idle_workers_wake_on_the_hint(submitter: Arc<dyn Store>, worker_store: Arc<dyn Store>) {
    let mut params = pool_params(worker_store, 2);
    params.poll_interval = Duration::from_secs(3600);
    let pool = WorkerPool::start(params);
    // Let both loops finish their first (empty) claim and go idle before the task exists.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ids = submit(submitter.as_ref(), 1, 1, 0).await;
    let tasks = wait_terminal(submitter.as_ref(), &ids).await;
    assert_eq!(tasks[0].status, TaskStatus::Succeeded);
    assert!(pool.shutdown(Duration::from_secs(5)).await.drained);
}

#[tokio::test]
async fn idle_workers_wake_on_the_runnable_hint_on_postgres() {
    let db = common::TestPg::create().await;
    let workers: Arc<dyn Store> = Arc::new(PgStore::connect(&db.url, 4).await.expect("connect"));
    workers.migrate().await.expect("migrate");
    let submitter: Arc<dyn Store> = Arc::new(PgStore::connect(&db.url, 2).await.expect("connect"));
    idle_workers_wake_on_the_hint(submitter, workers).await;
    db.drop_database().await;
}

#[tokio::test]
async fn idle_workers_wake_on_the_runnable_hint_on_sqlite() {
    let db = common::TestSqlite::create();
    let store = SqliteStore::open(&db.path).await.expect("open sqlite");
    store.migrate().await.expect("migrate");
    let store: Arc<dyn Store> = Arc::new(store);
    idle_workers_wake_on_the_hint(store.clone(), store).await;
}

/// Fails every run, one way or another.
struct Broken {
    panic: bool,
}

#[async_trait::async_trait]
impl Engine for Broken {
    async fn run(&self, _ctx: RunContext) -> Result<RunOutcome, EngineError> {
        if self.panic {
            panic!("engine bug");
        }
        Err(EngineError::Other("the model said no".to_string()))
    }
}

/// An engine error or panic fails its task with a fenced `task.failed` commit, and the worker
/// loop survives to run the next task.
#[tokio::test]
async fn engine_errors_and_panics_fail_the_task_and_the_pool_carries_on() {
    let db = common::TestSqlite::create();
    let store = SqliteStore::open(&db.path).await.expect("open sqlite");
    store.migrate().await.expect("migrate");
    let store: Arc<dyn Store> = Arc::new(store);
    for (panic, message) in [(false, "the model said no"), (true, "engine bug")] {
        let mut params = pool_params(store.clone(), 1);
        params.engine = Arc::new(Broken { panic });
        let pool = WorkerPool::start(params);
        let ids = submit(store.as_ref(), 2, 1, 0).await;
        for task in wait_terminal(store.as_ref(), &ids).await {
            assert_eq!(task.status, TaskStatus::Failed);
            let result = task.result.clone().expect("a failure report");
            assert_eq!(result["reason"], "engine_error");
            assert!(
                result["error"].as_str().unwrap_or("").contains(message),
                "{result}"
            );
            let history = events(store.as_ref(), task.id).await;
            assert_eq!(
                history.last().map(|e| e.kind.as_str()),
                Some(kinds::TASK_FAILED)
            );
        }
        assert!(pool.shutdown(Duration::from_secs(5)).await.drained);
    }
}

/// The minimal engine honours `budget.wall_ms`: a task whose steps outlast it ends
/// `budget_exhausted` with a report of how far it got.
#[tokio::test]
async fn the_wall_clock_budget_ends_a_task_as_budget_exhausted() {
    let db = common::TestSqlite::create();
    let store = SqliteStore::open(&db.path).await.expect("open sqlite");
    store.migrate().await.expect("migrate");
    let store: Arc<dyn Store> = Arc::new(store);
    let pool = WorkerPool::start(pool_params(store.clone(), 1));
    let new = NewTask {
        tools: None,
        id: uuid::Uuid::now_v7(),
        tenant_id: DEFAULT_TENANT.to_string(),
        goal: "too slow for its budget".to_string(),
        strategy: Strategy::Auto,
        budget: Budget {
            tokens: 1000,
            tool_calls: 10,
            wall_ms: 50,
            cost: None,
        },
        metadata: json!({ "engine_steps": 5, "engine_step_ms": 40 }),
        approval: Default::default(),
    };
    let id = store
        .create_task(new, None, SystemClock.now())
        .await
        .expect("create")
        .task
        .id;
    let task = wait_terminal(store.as_ref(), &[id]).await.remove(0);
    assert_eq!(task.status, TaskStatus::BudgetExhausted);
    let report = task.result.expect("report");
    assert_eq!(report["unit"], "wall_ms");
    assert_eq!(report["budget"], 50);
    assert!(report["spent"].as_u64().unwrap_or(0) > 50, "{report}");
    let done = report["steps_done"].as_u64().expect("steps_done");
    assert!(done < 5, "{report}");
    let history = events(store.as_ref(), id).await;
    assert_eq!(
        history
            .iter()
            .filter(|e| e.kind == kinds::ENGINE_STEP)
            .count() as u64,
        done
    );
    assert_eq!(
        history.last().map(|e| e.kind.as_str()),
        Some(kinds::TASK_BUDGET_EXHAUSTED)
    );
    assert!(pool.shutdown(Duration::from_secs(5)).await.drained);
}

/// The same guarantee between two real `cairn serve` processes on one database: tasks POSTed
/// to either are shared between both, and each runs on one worker at a time.
#[tokio::test]
async fn two_serve_processes_on_one_postgres_share_tasks_without_overlap() {
    let db = common::TestPg::create().await;
    let store = PgStore::connect(&db.url, 2).await.expect("connect");
    store.migrate().await.expect("migrate");
    let settings = [("CAIRN_WORKERS", "2"), ("CAIRN_POLL_INTERVAL_MS", "200")];
    let one = Serve::start(Db::Postgres(&db.url), &settings).await;
    let two = Serve::start(Db::Postgres(&db.url), &settings).await;
    let mut ids = Vec::new();
    for n in 0..16 {
        let addr = if n % 2 == 0 { one.addr } else { two.addr };
        ids.push(post_task(addr, 3, 40).await);
    }
    let tasks = wait_terminal(&store, &ids).await;
    let mut claimers = HashSet::new();
    for task in &tasks {
        assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
        assert_eq!(task.attempts, 1, "task {} claimed twice", task.id);
        claimers.extend(check_history(task, &events(&store, task.id).await, 3));
    }
    // Each process claims under its own worker id.
    assert_eq!(
        claimers.len(),
        2,
        "both processes should have run tasks: {claimers:?}"
    );
    assert_eq!(one.terminate().await, Some(0));
    assert_eq!(two.terminate().await, Some(0));
    db.drop_database().await;
}

/// Two live processes of one node (same host, same database: the same default node id) never
/// take each other's tasks: the second finds the node's lock held, reclaims nothing, and runs
/// under a node id of its own. The first process's running task stays its own to the end.
#[tokio::test]
async fn a_second_live_process_of_the_same_node_reclaims_nothing() {
    let db = common::TestPg::create().await;
    let store = PgStore::connect(&db.url, 2).await.expect("connect");
    store.migrate().await.expect("migrate");
    let settings = [("CAIRN_WORKERS", "1"), ("CAIRN_POLL_INTERVAL_MS", "200")];
    let one = Serve::start(Db::Postgres(&db.url), &settings).await;
    let id = post_task(one.addr, 10, 150).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while events(&store, id)
        .await
        .iter()
        .filter(|e| e.kind == kinds::ENGINE_STEP)
        .count()
        < 2
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the task did not start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let two = Serve::start(Db::Postgres(&db.url), &settings).await;
    let tasks = wait_terminal(&store, &[id]).await;
    assert_eq!(tasks[0].status, TaskStatus::Succeeded);
    assert_eq!(
        tasks[0].attempts, 1,
        "the live process's task was taken from it"
    );
    let history = events(&store, id).await;
    assert!(
        !history.iter().any(|e| e.kind == kinds::TASK_RELEASED),
        "{:?}",
        history.iter().map(|e| &e.kind).collect::<Vec<_>>()
    );
    assert_eq!(one.terminate().await, Some(0));
    assert_eq!(two.terminate().await, Some(0));
    db.drop_database().await;
}
