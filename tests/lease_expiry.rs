//! Lease expiry driven by a [`ManualClock`]: no sleep decides anything here. A worker that stops
//! heartbeating loses its task once the clock passes its lease, the reaper requeues it, another
//! worker finishes it, and the first worker's next commit is refused as `LeaseLost`.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cairn::clock::{Clock, ManualClock};
use cairn::domain::event::{NewEvent, kinds};
use cairn::domain::task::{Budget, DEFAULT_TENANT, Lease, NewTask, Strategy, TaskId, TaskStatus};
use cairn::engine::minimal::MinimalEngine;
use cairn::engine::{Engine, EngineError, RunContext, RunOutcome};
use cairn::store::postgres::PgStore;
use cairn::store::sqlite::SqliteStore;
use cairn::store::{Change, Commit, LeaseStatus, Store};
use cairn::worker::reaper::reap_once;
use cairn::worker::{PoolParams, WorkerPool};
use serde_json::json;
use tokio::sync::{mpsc, watch};

/// Wraps the minimal engine: reports each claim's lease, waits for the gate to open, then
/// reports how the run ended.
struct Observed {
    inner: MinimalEngine,
    gate: watch::Receiver<bool>,
    claimed: mpsc::UnboundedSender<Lease>,
    ended: mpsc::UnboundedSender<Result<RunOutcome, String>>,
}

#[async_trait]
impl Engine for Observed {
    async fn run(&self, ctx: RunContext) -> Result<RunOutcome, EngineError> {
        let _ = self.claimed.send(ctx.lease.clone());
        let mut gate = self.gate.clone();
        let _ = gate.wait_for(|open| *open).await;
        let result = self.inner.run(ctx).await;
        let _ = self
            .ended
            .send(result.as_ref().map(|o| *o).map_err(|e| e.to_string()));
        result
    }
}

struct Probe {
    engine: Arc<Observed>,
    gate: watch::Sender<bool>,
    claimed: mpsc::UnboundedReceiver<Lease>,
    ended: mpsc::UnboundedReceiver<Result<RunOutcome, String>>,
}

fn probe(gate_open: bool) -> Probe {
    let (gate, gate_rx) = watch::channel(gate_open);
    let (claimed_tx, claimed) = mpsc::unbounded_channel();
    let (ended_tx, ended) = mpsc::unbounded_channel();
    Probe {
        engine: Arc::new(Observed {
            inner: MinimalEngine::default(),
            gate: gate_rx,
            claimed: claimed_tx,
            ended: ended_tx,
        }),
        gate,
        claimed,
        ended,
    }
}

fn params(store: Arc<dyn Store>, engine: Arc<dyn Engine>, clock: Arc<dyn Clock>) -> PoolParams {
    PoolParams {
        store,
        engine,
        clock,
        worker_id: cairn::worker::process_worker_id(),
        workers: 1,
        max_running_per_tenant: None,
        lease_ttl: Duration::from_secs(10),
        heartbeat: Duration::from_millis(50),
        poll_interval: Duration::from_millis(50),
        meters: cairn::meters::Meters::new(),
        spend_caps: Default::default(),
    }
}

async fn submit(store: &dyn Store, clock: &dyn Clock, metadata: serde_json::Value) -> TaskId {
    let new = NewTask {
        tools: None,
        id: uuid::Uuid::now_v7(),
        tenant_id: DEFAULT_TENANT.to_string(),
        goal: "lease expiry".to_string(),
        strategy: Strategy::Auto,
        budget: Budget {
            tokens: 100,
            tool_calls: 10,
            wall_ms: 3_600_000,
            cost: None,
        },
        metadata,
        approval: Default::default(),
    };
    store
        .create_task(new, None, clock.now())
        .await
        .expect("create")
        .task
        .id
}

/// Bounded wait on a channel: the only waits in these tests, and none of them decides an outcome.
async fn recv<T>(rx: &mut mpsc::UnboundedReceiver<T>, what: &str) -> T {
    tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .unwrap_or_else(|| panic!("channel closed waiting for {what}"))
}

#[tokio::test]
async fn expired_lease_is_reaped_finished_elsewhere_and_refused_to_the_old_worker_on_postgres() {
    let db = common::TestPg::create().await;
    let store_a: Arc<dyn Store> = Arc::new(PgStore::connect(&db.url, 4).await.expect("connect"));
    store_a.migrate().await.expect("migrate");
    let store_b: Arc<dyn Store> = Arc::new(PgStore::connect(&db.url, 4).await.expect("connect"));
    expire_reap_and_refuse(store_a, store_b).await;
    db.drop_database().await;
}

#[tokio::test]
async fn expired_lease_is_reaped_finished_elsewhere_and_refused_to_the_old_worker_on_sqlite() {
    let db = common::TestSqlite::create();
    let store = SqliteStore::open(&db.path).await.expect("open");
    store.migrate().await.expect("migrate");
    let store: Arc<dyn Store> = Arc::new(store);
    // SQLite is single-node: both workers share the one store of the process.
    expire_reap_and_refuse(store.clone(), store).await;
}

/// Worker A (on `store_a`) claims and goes silent; worker B (on `store_b`) takes over.
async fn expire_reap_and_refuse(store_a: Arc<dyn Store>, store_b: Arc<dyn Store>) {
    let manual = Arc::new(ManualClock::new(chrono::Utc::now()));
    let clock: Arc<dyn Clock> = manual.clone();

    // Worker A never heartbeats (its period is an hour) and is held at the gate after claiming.
    let mut a = probe(false);
    let mut a_params = params(store_a.clone(), a.engine.clone(), clock.clone());
    a_params.heartbeat = Duration::from_secs(3600);
    let pool_a = WorkerPool::start(a_params);
    let id = submit(
        store_a.as_ref(),
        clock.as_ref(),
        json!({"engine_steps": 2, "engine_step_ms": 0}),
    )
    .await;
    let lease_a = recv(&mut a.claimed, "worker A's claim").await;
    assert_eq!(lease_a.task_id, id);

    // Within the lease the reaper leaves it alone.
    manual.advance(chrono::Duration::seconds(9));
    assert!(
        reap_once(store_b.as_ref(), clock.as_ref())
            .await
            .expect("reap")
            .is_empty()
    );
    // Past it, the task is requeued.
    manual.advance(chrono::Duration::seconds(2));
    let reaped = reap_once(store_b.as_ref(), clock.as_ref())
        .await
        .expect("reap");
    assert_eq!(reaped, vec![id]);
    assert_eq!(
        store_a
            .heartbeat(&lease_a, clock.now(), chrono::Duration::seconds(10))
            .await
            .expect("beat"),
        LeaseStatus::Lost,
        "a reaped lease cannot be revived by a late heartbeat"
    );

    // Worker B (another process) claims it and finishes it.
    let mut b = probe(true);
    let pool_b = WorkerPool::start(params(store_b.clone(), b.engine.clone(), clock.clone()));
    let lease_b = recv(&mut b.claimed, "worker B's claim").await;
    assert!(lease_b.fence > lease_a.fence);
    assert_eq!(
        recv(&mut b.ended, "worker B's run").await,
        Ok(RunOutcome::Finished(TaskStatus::Succeeded))
    );

    // Worker A wakes up and tries to go on: its first commit is refused.
    a.gate.send_replace(true);
    assert_eq!(
        recv(&mut a.ended, "worker A's run").await,
        Ok(RunOutcome::LeaseLost)
    );
    let late = Change {
        events: vec![NewEvent::new("test.late_write", json!({}))],
        ..Change::default()
    };
    assert_eq!(
        store_a
            .commit(&lease_a, late, clock.now())
            .await
            .expect("commit"),
        Commit::LeaseLost
    );

    let task = store_a
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(task.status, TaskStatus::Succeeded);
    assert_eq!(task.attempts, 2);
    let events = store_a
        .list_events(DEFAULT_TENANT, id, 0, 100)
        .await
        .expect("events");
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        vec![
            kinds::TASK_CREATED,
            kinds::TASK_CLAIMED,
            kinds::TASK_LEASE_EXPIRED,
            kinds::TASK_CLAIMED,
            kinds::ENGINE_STEP,
            kinds::ENGINE_STEP,
            kinds::TASK_SUCCEEDED,
        ]
    );
    for step in events.iter().filter(|e| e.kind == kinds::ENGINE_STEP) {
        assert_eq!(step.data["fence"], json!(lease_b.fence));
    }
    let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=7).collect::<Vec<i64>>());

    pool_a.shutdown(Duration::from_secs(5)).await;
    pool_b.shutdown(Duration::from_secs(5)).await;
}

/// A heartbeat that finds its lease gone (here: the task was cancelled, which moves the fence)
/// stops the engine in the middle of a long step instead of letting it run on.
#[tokio::test]
async fn heartbeat_stops_the_engine_when_the_lease_is_lost() {
    let db = common::TestPg::create().await;
    let store: Arc<dyn Store> = Arc::new(PgStore::connect(&db.url, 4).await.expect("connect"));
    store.migrate().await.expect("migrate");
    let manual = Arc::new(ManualClock::new(chrono::Utc::now()));
    let clock: Arc<dyn Clock> = manual.clone();
    let mut a = probe(true);
    let pool = WorkerPool::start(params(store.clone(), a.engine.clone(), clock.clone()));
    // One step of ten minutes: only the heartbeat can end this run within the test's bound.
    let id = submit(
        store.as_ref(),
        clock.as_ref(),
        json!({"engine_steps": 1, "engine_step_ms": 600_000}),
    )
    .await;
    recv(&mut a.claimed, "the claim").await;
    store
        .cancel_task(DEFAULT_TENANT, id, clock.now())
        .await
        .expect("cancel");
    assert_eq!(
        recv(&mut a.ended, "the run to stop").await,
        Ok(RunOutcome::LeaseLost)
    );
    let task = store
        .get_task(DEFAULT_TENANT, id)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(task.status, TaskStatus::Cancelled);
    let events = store
        .list_events(DEFAULT_TENANT, id, 0, 100)
        .await
        .expect("events");
    assert!(events.iter().all(|e| e.kind != kinds::ENGINE_STEP));
    assert!(pool.shutdown(Duration::from_secs(5)).await.drained);
    db.drop_database().await;
}
