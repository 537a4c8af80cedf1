//! The per-tenant cap on running tasks (`ClaimParams::max_running_per_tenant`): enforced at
//! claim time, so a tenant at its cap keeps its tasks queued while other tenants' tasks are
//! claimed, and every way a running task ends frees its slot.

use std::collections::HashMap;
use std::sync::Arc;

use cairn::clock::{Clock, ManualClock};
use cairn::domain::task::{TaskId, TaskStatus};
use cairn::store::{Change, ClaimParams, Claimed, Commit, Store};
use chrono::Duration;

use crate::support::*;

/// Creates a task of `tenant` one millisecond after the previous one (ids follow creation).
async fn create_for(store: &Arc<dyn Store>, clock: &ManualClock, tenant: &str) -> TaskId {
    clock.advance(Duration::milliseconds(1));
    store
        .create_task(new_task(tenant, "capped"), None, clock.now())
        .await
        .expect("create task")
        .task
        .id
}

async fn claim_capped(
    store: &Arc<dyn Store>,
    clock: &ManualClock,
    worker: &str,
    cap: u32,
) -> Option<Claimed> {
    store
        .claim(ClaimParams::new(worker, clock.now(), lease_ttl()).with_cap(cap))
        .await
        .expect("claim")
}

async fn status(store: &Arc<dyn Store>, tenant: &str, id: TaskId) -> TaskStatus {
    store
        .get_task(tenant, id)
        .await
        .expect("get")
        .expect("task")
        .status
}

pub async fn cap_is_respected(store: Arc<dyn Store>) {
    let clock = clock();
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(create_for(&store, &clock, "acme").await);
    }
    for (n, id) in ids.iter().take(2).enumerate() {
        let claimed = claim_capped(&store, &clock, &format!("w{n}"), 2)
            .await
            .expect("a task under the cap");
        assert_eq!(claimed.task.id, *id, "oldest first under the cap");
    }
    assert!(
        claim_capped(&store, &clock, "w2", 2).await.is_none(),
        "a third running task would exceed the cap of 2"
    );
    assert_eq!(status(&store, "acme", ids[2]).await, TaskStatus::Queued);
    // The cap, not the queue, held it back: a claim without one takes it.
    let uncapped = claim(&store, &clock, "w3").await;
    assert_eq!(uncapped.task.id, ids[2]);
}

pub async fn other_tenants_task_is_claimed_past_a_capped_tenant(store: Arc<dyn Store>) {
    let clock = clock();
    let acme_first = create_for(&store, &clock, "acme").await;
    let acme_second = create_for(&store, &clock, "acme").await;
    let globex = create_for(&store, &clock, "globex").await;
    let acme_third = create_for(&store, &clock, "acme").await;

    let first = claim_capped(&store, &clock, "w1", 1).await.expect("task");
    assert_eq!(first.task.id, acme_first);
    let second = claim_capped(&store, &clock, "w2", 1).await.expect("task");
    assert_eq!(
        second.task.id, globex,
        "acme is at its cap: its older task is passed over for globex's"
    );
    assert!(claim_capped(&store, &clock, "w3", 1).await.is_none());
    for id in [acme_second, acme_third] {
        assert_eq!(status(&store, "acme", id).await, TaskStatus::Queued);
    }
    // A cap of 2 lets acme's next-oldest task run, and still not its third.
    let third = claim_capped(&store, &clock, "w4", 2).await.expect("task");
    assert_eq!(third.task.id, acme_second);
    assert!(claim_capped(&store, &clock, "w5", 2).await.is_none());
}

pub async fn ending_a_running_task_frees_its_slot(store: Arc<dyn Store>) {
    let clock = clock();
    let mut queued = Vec::new();
    for _ in 0..4 {
        queued.push(create_for(&store, &clock, "acme").await);
    }
    let running = claim_capped(&store, &clock, "w", 1).await.expect("task");
    assert!(claim_capped(&store, &clock, "w", 1).await.is_none());

    // Finished: a terminal commit frees the slot.
    let done = Change {
        status: Some(TaskStatus::Succeeded),
        ..Change::default()
    };
    let applied = commit(&store, &clock, &running.lease, done).await;
    assert!(matches!(applied, Commit::Applied { .. }), "{applied:?}");
    let running = claim_capped(&store, &clock, "w", 1).await.expect("task");
    assert_eq!(running.task.id, queued[1]);
    assert!(claim_capped(&store, &clock, "w", 1).await.is_none());

    // Cancelled while running.
    store
        .cancel_task("acme", running.task.id, clock.now())
        .await
        .expect("cancel");
    let running = claim_capped(&store, &clock, "w", 1).await.expect("task");
    assert_eq!(running.task.id, queued[2]);
    assert!(claim_capped(&store, &clock, "w", 1).await.is_none());

    // Its lease expired and was reaped: requeued, it competes again as the oldest queued task.
    clock.advance(lease_ttl() + Duration::seconds(1));
    let reaped = store.reap_expired(clock.now()).await.expect("reap");
    assert_eq!(reaped, vec![queued[2]]);
    let again = claim_capped(&store, &clock, "w", 1).await.expect("task");
    assert_eq!(again.task.id, queued[2], "the requeued task is the oldest");
    assert!(claim_capped(&store, &clock, "w", 1).await.is_none());
    assert_eq!(status(&store, "acme", queued[3]).await, TaskStatus::Queued);
}

/// Claimers racing over several tenants' tasks: each claimer keeps what it claims running, so
/// when the queue runs dry every tenant must hold exactly `min(cap, its tasks)` running tasks.
pub async fn concurrent_capped_claims_stop_at_the_cap(store: Arc<dyn Store>) {
    const CAP: u32 = 2;
    let clock = clock();
    let tenants = ["acme", "globex", "initech"];
    let mut tenant_of = HashMap::new();
    for n in 0..12 {
        let tenant = tenants[n % tenants.len()];
        tenant_of.insert(create_for(&store, &clock, tenant).await, tenant);
    }
    let now = clock.now();
    let mut handles = Vec::new();
    for n in 0..6 {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            let worker = format!("worker-{n}");
            let mut mine = Vec::new();
            while let Some(claimed) = store
                .claim(ClaimParams::new(&worker, now, lease_ttl()).with_cap(CAP))
                .await
                .expect("claim")
            {
                mine.push(claimed.task.id);
            }
            mine
        }));
    }
    let mut running: HashMap<&str, usize> = HashMap::new();
    for handle in handles {
        for id in handle.await.expect("claimer") {
            *running.entry(tenant_of[&id]).or_default() += 1;
        }
    }
    for tenant in tenants {
        assert_eq!(running.get(tenant), Some(&(CAP as usize)), "{running:?}");
    }
}
