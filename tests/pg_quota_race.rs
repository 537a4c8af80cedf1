//! Postgres, the per-tenant cap under contention: many claimers on several stores (as if on
//! several replicas) claim, hold and finish the tasks of several tenants, and no tenant ever
//! has more running tasks than the cap. With a cap of one, a tenant's tasks also start in the
//! order they were submitted: claimers racing for one tenant must not take a younger task while
//! another claimer holds the older one's row.
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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use cairn::domain::task::{TaskId, TaskStatus};
use cairn::store::postgres::PgStore;
use cairn::store::{Change, ClaimParams, Commit, Store, TaskQuery};
use chrono::{Duration, Utc};
use tokio::sync::Barrier;

const TENANTS: [&str; 4] = ["acme", "globex", "initech", "umbrella"];
const TASKS_PER_TENANT: usize = 12;
const CLAIMERS: usize = 16;
/// Claimers spread over this many stores (pools), as if on several replicas.
const STORES: usize = 4;
/// How long a claimer keeps a task running, so that claims of one tenant overlap.
const HOLD: StdDuration = StdDuration::from_millis(50);

/// Tasks in hand per tenant, the most ever seen at once, and the tasks each tenant's claims took
/// in the order the claims returned.
#[derive(Default)]
struct InHand {
    now: HashMap<String, AtomicUsize>,
    peak: HashMap<String, AtomicUsize>,
    taken: Mutex<HashMap<String, Vec<TaskId>>>,
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

    fn took(&self, tenant: &str, id: TaskId) -> usize {
        self.taken
            .lock()
            .unwrap()
            .entry(tenant.to_string())
            .or_default()
            .push(id);
        let count = self.now[tenant].fetch_add(1, Ordering::SeqCst) + 1;
        self.peak[tenant].fetch_max(count, Ordering::SeqCst);
        count
    }

    fn gave_back(&self, tenant: &str) {
        self.now[tenant].fetch_sub(1, Ordering::SeqCst);
    }
}

/// One claimer's share of the race.
struct Claimer {
    store: Arc<PgStore>,
    worker: String,
    hand: Arc<InHand>,
    done: Arc<AtomicUsize>,
    cap: u32,
}

/// Claims until every task is done, holding each for [`HOLD`] before finishing it.
async fn claimer(claimer: Claimer) {
    let Claimer {
        store,
        worker,
        hand,
        done,
        cap,
    } = claimer;
    let total = TENANTS.len() * TASKS_PER_TENANT;
    while done.load(Ordering::SeqCst) < total {
        let params = ClaimParams::new(&worker, Utc::now(), Duration::seconds(60)).with_cap(cap);
        let Some(claimed) = store.claim(params).await.expect("claim") else {
            // Every queued task belongs to a tenant at its cap: wait for a slot.
            tokio::time::sleep(StdDuration::from_millis(1)).await;
            continue;
        };
        let tenant = claimed.task.tenant_id.clone();
        let in_hand = hand.took(&tenant, claimed.task.id);
        assert!(
            in_hand <= cap as usize,
            "{tenant} has {in_hand} tasks running at once, over the cap of {cap}"
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
async fn monitor(url: String, done: Arc<AtomicUsize>, cap: u32) -> (HashMap<String, i64>, usize) {
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
                running <= i64::from(cap),
                "snapshot {reads}: {tenant} has {running} running tasks, over the cap of {cap}"
            );
            let entry = peak.entry(tenant).or_default();
            *entry = (*entry).max(running);
        }
        tokio::task::yield_now().await;
    }
    pool.close().await;
    (peak, reads)
}

/// Runs the race with `cap`: every task runs, no tenant passes the cap, and the cap binds (it is
/// reached). Returns each tenant's claimed tasks in claim order, and each tenant's creation order.
async fn race(cap: u32) -> (HashMap<String, Vec<TaskId>>, HashMap<String, Vec<TaskId>>) {
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
    let mut created: HashMap<String, Vec<TaskId>> = HashMap::new();
    for n in 0..TASKS_PER_TENANT {
        for tenant in TENANTS {
            let task = stores[0]
                .create_task(
                    common::new_task(tenant, &format!("goal {n}")),
                    None,
                    Utc::now(),
                )
                .await
                .expect("create");
            created
                .entry(tenant.to_string())
                .or_default()
                .push(task.task.id);
        }
    }

    let hand = Arc::new(InHand::new());
    let done = Arc::new(AtomicUsize::new(0));
    let watcher = tokio::spawn(monitor(db.url.clone(), done.clone(), cap));
    let barrier = Arc::new(Barrier::new(CLAIMERS));
    let mut handles = Vec::new();
    for n in 0..CLAIMERS {
        let share = Claimer {
            store: stores[n % STORES].clone(),
            worker: format!("worker-{n}"),
            hand: hand.clone(),
            done: done.clone(),
            cap,
        };
        let barrier = barrier.clone();
        handles.push(tokio::spawn(async move {
            barrier.wait().await;
            claimer(share).await;
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
            cap as usize,
            "{tenant}'s peak in hand"
        );
    }
    assert!(reads > 0, "the monitor read the database");
    assert!(
        peak.values().all(|running| *running <= i64::from(cap)),
        "{peak:?}"
    );
    eprintln!(
        "pg_quota_race: {} tasks, {CLAIMERS} claimers on {STORES} stores, cap {cap}: peak in hand \
         {:?}, monitor peaks {peak:?} over {reads} snapshots",
        TENANTS.len() * TASKS_PER_TENANT,
        TENANTS
            .iter()
            .map(|t| hand.peak[*t].load(Ordering::SeqCst))
            .collect::<Vec<_>>()
    );
    drop(stores);
    db.drop_database().await;
    let taken = std::mem::take(&mut *hand.taken.lock().unwrap());
    (taken, created)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_capped_claimers_never_exceed_the_cap() {
    race(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn under_a_cap_of_one_a_tenants_tasks_start_in_submission_order() {
    let (taken, created) = race(1).await;
    // One running task per tenant: a claim of the tenant returns only after the previous one
    // finished, so the order the claims were recorded in is the order they were made.
    for tenant in TENANTS {
        assert_eq!(
            taken[tenant], created[tenant],
            "{tenant}'s tasks started out of order"
        );
    }
}
