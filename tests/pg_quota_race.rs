//! Postgres, the per-tenant cap under contention: many claimers on several stores (as if on
//! several replicas) claim, hold and finish the tasks of several tenants, and no tenant ever
//! has more running tasks than the cap.
//!
//! Two independent witnesses: each claimer counts its tenant's tasks in hand (incremented after
//! a claim returns, decremented before the finishing commit, so the count never exceeds the
//! database's running set and a count above the cap is a real violation), and a monitor reads
//! the running count per tenant from the database in a loop, each read one consistent snapshot.
// Test code: a failed set-up is a failed test, and it may read the wall clock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration as StdDuration;

use cairn::domain::task::TaskStatus;
use cairn::store::postgres::PgStore;
use cairn::store::{Change, ClaimParams, Commit, Store, TaskQuery};
use chrono::{Duration, Utc};
use tokio::sync::Barrier;

const TENANTS: [&str; 4] = ["acme", "globex", "initech", "umbrella"];
const TASKS_PER_TENANT: usize = 12;
const CAP: u32 = 2;
const CLAIMERS: usize = 16;
/// Claimers spread over this many stores (pools), as if on several replicas.
const STORES: usize = 4;
/// How long a claimer keeps a task running, so that claims of one tenant overlap.
const HOLD: StdDuration = StdDuration::from_millis(50);

/// Tasks in hand per tenant, and the most ever seen at once.
#[derive(Default)]
struct InHand {
    now: HashMap<String, AtomicUsize>,
    peak: HashMap<String, AtomicUsize>,
}

impl InHand {
    fn new() -> Self {
        let mut hand = InHand::default();
        for tenant in TENANTS {
            hand.now.insert(tenant.to_string(), AtomicUsize::new(0));
            hand.peak.insert(tenant.to_string(), AtomicUsize::new(0));
        }
        hand
    }

    fn took(&self, tenant: &str) -> usize {
        let count = self.now[tenant].fetch_add(1, Ordering::SeqCst) + 1;
        self.peak[tenant].fetch_max(count, Ordering::SeqCst);
        count
    }

    fn gave_back(&self, tenant: &str) {
        self.now[tenant].fetch_sub(1, Ordering::SeqCst);
    }
}

/// Claims until every task is done, holding each for [`HOLD`] before finishing it.
async fn claimer(store: Arc<PgStore>, worker: String, hand: Arc<InHand>, done: Arc<AtomicUsize>) {
    let total = TENANTS.len() * TASKS_PER_TENANT;
    while done.load(Ordering::SeqCst) < total {
        let params = ClaimParams::new(&worker, Utc::now(), Duration::seconds(60)).with_cap(CAP);
        let Some(claimed) = store.claim(params).await.expect("claim") else {
            // Every queued task belongs to a tenant at its cap: wait for a slot.
            tokio::time::sleep(StdDuration::from_millis(1)).await;
            continue;
        };
        let tenant = claimed.task.tenant_id.clone();
        let in_hand = hand.took(&tenant);
        assert!(
            in_hand <= CAP as usize,
            "{tenant} has {in_hand} tasks running at once, over the cap of {CAP}"
        );
        tokio::time::sleep(HOLD).await;
        hand.gave_back(&tenant);
        let finish = Change {
            status: Some(TaskStatus::Succeeded),
            ..Change::default()
        };
        let committed = store
            .commit(&claimed.lease, finish, Utc::now())
            .await
            .expect("commit");
        assert!(matches!(committed, Commit::Applied { .. }), "{committed:?}");
        done.fetch_add(1, Ordering::SeqCst);
    }
}

/// Reads the running count per tenant until every task is done; returns the peak per tenant
/// and how many snapshots it read.
async fn monitor(url: String, done: Arc<AtomicUsize>) -> (HashMap<String, i64>, usize) {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .expect("monitor connects");
    let total = TENANTS.len() * TASKS_PER_TENANT;
    let (mut peak, mut reads) = (HashMap::<String, i64>::new(), 0);
    while done.load(Ordering::SeqCst) < total {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT tenant_id, count(*) FROM tasks WHERE status = 'running' GROUP BY tenant_id",
        )
        .fetch_all(&pool)
        .await
        .expect("count running");
        reads += 1;
        for (tenant, running) in rows {
            assert!(
                running <= i64::from(CAP),
                "snapshot {reads}: {tenant} has {running} running tasks, over the cap of {CAP}"
            );
            let entry = peak.entry(tenant).or_default();
            *entry = (*entry).max(running);
        }
        tokio::task::yield_now().await;
    }
    pool.close().await;
    (peak, reads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_capped_claimers_never_exceed_the_cap() {
    let db = common::TestPg::create().await;
    let mut stores = Vec::new();
    for _ in 0..STORES {
        // One connection per claimer of the store, and no more: tests share the server.
        let store = PgStore::connect(&db.url, (CLAIMERS / STORES) as u32)
            .await
            .expect("connect");
        stores.push(Arc::new(store));
    }
    stores[0].migrate().await.expect("migrate");
    // Interleaved so every tenant has queued tasks all along the queue.
    for n in 0..TASKS_PER_TENANT {
        for tenant in TENANTS {
            stores[0]
                .create_task(
                    common::new_task(tenant, &format!("goal {n}")),
                    None,
                    Utc::now(),
                )
                .await
                .expect("create");
        }
    }

    let hand = Arc::new(InHand::new());
    let done = Arc::new(AtomicUsize::new(0));
    let watcher = tokio::spawn(monitor(db.url.clone(), done.clone()));
    let barrier = Arc::new(Barrier::new(CLAIMERS));
    let mut handles = Vec::new();
    for n in 0..CLAIMERS {
        let (store, hand, done) = (stores[n % STORES].clone(), hand.clone(), done.clone());
        let barrier = barrier.clone();
        handles.push(tokio::spawn(async move {
            barrier.wait().await;
            claimer(store, format!("worker-{n}"), hand, done).await;
        }));
    }
    for handle in handles {
        tokio::time::timeout(StdDuration::from_secs(120), handle)
            .await
            .expect("claimers finish in time")
            .expect("claimer");
    }
    let (peak, reads) = watcher.await.expect("monitor");

    let query = TaskQuery {
        status: None,
        before: None,
        limit: 1_000,
    };
    for tenant in TENANTS {
        let tasks = stores[1].list_tasks(tenant, &query).await.expect("list");
        assert_eq!(tasks.len(), TASKS_PER_TENANT);
        assert!(
            tasks.iter().all(|t| t.status == TaskStatus::Succeeded),
            "{tenant}: every task ran"
        );
        // With 16 claimers and 4 tenants the cap binds: it was reached, and never passed.
        assert_eq!(
            hand.peak[tenant].load(Ordering::SeqCst),
            CAP as usize,
            "{tenant}'s peak in hand"
        );
    }
    assert!(reads > 0, "the monitor read the database");
    assert!(
        peak.values().all(|running| *running <= i64::from(CAP)),
        "{peak:?}"
    );
    eprintln!(
        "pg_quota_race: {} tasks, {CLAIMERS} claimers on {STORES} stores, cap {CAP}: peak in hand \
         {:?}, monitor peaks {peak:?} over {reads} snapshots",
        TENANTS.len() * TASKS_PER_TENANT,
        TENANTS
            .iter()
            .map(|t| hand.peak[*t].load(Ordering::SeqCst))
            .collect::<Vec<_>>()
    );
    drop(stores);
    db.drop_database().await;
}
