//! Node identity: the node lock is exclusive while held, and reclaiming a node requeues only
//! the leases of that node's worker ids.

use std::sync::Arc;

use cairn::clock::Clock;
use cairn::domain::event::kinds;
use cairn::domain::task::{DEFAULT_TENANT, TaskStatus};
use cairn::store::Store;

use crate::support::*;

pub async fn node_lock_is_exclusive_until_dropped(store: Arc<dyn Store>) {
    let held = store.lock_node("node-a").await.expect("lock");
    assert!(held.is_some(), "a free node lock is taken");
    assert!(
        store.lock_node("node-a").await.expect("lock").is_none(),
        "a held node lock is refused"
    );
    let other = store.lock_node("node-b").await.expect("lock");
    assert!(other.is_some(), "another node's lock is independent");
    drop(held);
    // Postgres releases the lock when the server sees the dropped connection close, which is
    // not synchronous with the drop: wait for it (bounded), as a restarted process does.
    let mut again = None;
    for _ in 0..100 {
        again = store.lock_node("node-a").await.expect("lock");
        if again.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(again.is_some(), "a released node lock is free again");
}

pub async fn reclaim_requeues_only_the_node_s_leases(store: Arc<dyn Store>) {
    let clock = clock();
    let mine = create(&store, &clock, "mine").await;
    let theirs = create(&store, &clock, "theirs").await;
    let similar = create(&store, &clock, "similar name").await;
    claim(&store, &clock, "node-a/17-aaaa").await;
    claim(&store, &clock, "node-b/17-bbbb").await;
    claim(&store, &clock, "node-ab/3-cccc").await;

    let reclaimed = store
        .reclaim_node("node-a/", clock.now())
        .await
        .expect("reclaim");
    assert_eq!(reclaimed, vec![mine]);
    let status = |id| {
        let store = store.clone();
        async move {
            store
                .get_task(DEFAULT_TENANT, id)
                .await
                .expect("get")
                .expect("task")
                .status
        }
    };
    assert_eq!(status(mine).await, TaskStatus::Queued);
    assert_eq!(status(theirs).await, TaskStatus::Running);
    assert_eq!(status(similar).await, TaskStatus::Running);
    let events = store
        .list_events(DEFAULT_TENANT, mine, 0, 100)
        .await
        .expect("events");
    let released = events.last().expect("an event");
    assert_eq!(released.kind, kinds::TASK_RELEASED);
    assert_eq!(released.data["reason"], "owner_restarted");
    assert_eq!(released.data["worker_id"], "node-a/17-aaaa");
    // The next claim takes it with a new fence, so the old holder could write nothing more.
    let again = claim(&store, &clock, "node-a/18-dddd").await;
    assert_eq!(again.task.id, mine);
    assert_eq!(again.lease.fence, 2);
}
