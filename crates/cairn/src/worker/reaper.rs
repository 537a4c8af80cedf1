//! The reaper: requeues tasks whose lease expired, so a dead or stuck worker never strands a task,
//! and ends the tasks whose approval request nobody answered in time.
//!
//! Its first pass runs as soon as it starts. That pass is what resumes the tasks of a crashed
//! process on restart; later passes catch leases that expire while this process runs (another
//! replica died, or a worker stopped heartbeating). Requeueing bumps nothing a live worker
//! relies on except the lease itself: the next claim bumps the fence, so the old holder's
//! writes are refused from then on.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::clock::Clock;
use crate::domain::task::TaskId;
use crate::meters::Meters;
use crate::store::{NodeLock, Store, StoreError};

#[derive(Clone)]
pub struct ReaperParams {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub interval: Duration,
    /// Counts the leases each pass takes back.
    pub meters: Meters,
}

/// A running reaper; [`Reaper::stop`] ends it.
pub struct Reaper {
    stop: watch::Sender<bool>,
    handle: JoinHandle<()>,
}

/// One pass: requeues every lease expired at the clock's current time, and fails every task
/// whose approval request expired unanswered.
pub async fn reap_once(store: &dyn Store, clock: &dyn Clock) -> Result<Vec<TaskId>, StoreError> {
    let reaped = store.reap_expired(clock.now()).await?;
    for task_id in &reaped {
        tracing::info!(%task_id, "lease expired; task requeued");
    }
    for task_id in store.expire_approvals(clock.now()).await? {
        tracing::info!(%task_id, "approval request expired unanswered; task failed");
    }
    Ok(reaped)
}

/// At start-up: takes the lock of `node` and, holding it, requeues at once every task a dead
/// process of this node still holds a lease on (their leases would otherwise only expire after
/// their TTL). Returns the lock (keep it for the life of the process) and the node id the
/// workers use. When a live process holds the lock, nothing is reclaimed and a node id of its
/// own is used: two live processes never run one task at once.
pub async fn claim_node(
    store: &dyn Store,
    clock: &dyn Clock,
    node: &str,
) -> Result<(Option<NodeLock>, String), StoreError> {
    match store.lock_node(node).await? {
        Some(lock) => {
            let reclaimed = store
                .reclaim_node(&super::node_prefix(node), clock.now())
                .await?;
            for task_id in &reclaimed {
                tracing::info!(%task_id, node, "requeued a task of this node's previous process");
            }
            Ok((Some(lock), node.to_string()))
        }
        None => {
            let own = super::unique_node_id(node);
            tracing::warn!(
                node,
                using = %own,
                "another live process runs as this node (CAIRN_NODE_ID); its leases are left to expire"
            );
            Ok((None, own))
        }
    }
}

impl Reaper {
    /// Starts the loop; the first pass runs immediately.
    pub fn start(params: ReaperParams) -> Reaper {
        let (stop, mut stopped) = watch::channel(false);
        let handle = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(params.interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticks.tick() => {
                        match reap_once(params.store.as_ref(), params.clock.as_ref()).await {
                            Ok(reaped) => params.meters.leases_reclaimed(reaped.len() as u64),
                            Err(error) => {
                                tracing::warn!(%error, "reaper pass failed; retrying next interval");
                            }
                        }
                    }
                    _ = super::raised(&mut stopped) => break,
                }
            }
        });
        Reaper { stop, handle }
    }

    pub async fn stop(self) {
        self.stop.send_replace(true);
        let _ = self.handle.await;
    }
}
