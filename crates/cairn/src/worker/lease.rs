//! Lease heartbeats for one running task.
//!
//! While an engine runs, a heartbeat task extends the lease every `every` and relays two
//! things to the engine through its [`StopSignal`] watch: a lost lease (the reaper requeued the
//! task, or it was cancelled: the fence moved) and the process shutting down. It also rings the
//! engine's [`Inbox`] when the store announces a message for the task, and at every beat (a
//! message posted through another replica is announced there only). It keeps
//! heartbeating during shutdown, because the engine still needs its lease to reach a durable
//! point and to release the task cleanly.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

use crate::clock::Clock;
use crate::domain::task::Lease;
use crate::engine::{Inbox, StopSignal};
use crate::store::{LeaseStatus, Store, Wakeup};

pub struct HeartbeatParams {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub lease: Lease,
    pub ttl: chrono::Duration,
    pub every: Duration,
    /// The pool's shutdown flag.
    pub shutdown: watch::Receiver<bool>,
    /// The engine's stop signal.
    pub stop: watch::Sender<StopSignal>,
    /// The engine's inbox, rung for a person's message.
    pub inbox: Inbox,
    /// The store's hints.
    pub hints: broadcast::Receiver<Wakeup>,
}

/// Spawns the heartbeat; abort the handle when the engine returns.
pub fn spawn_heartbeat(params: HeartbeatParams) -> JoinHandle<()> {
    tokio::spawn(heartbeat(params))
}

async fn heartbeat(params: HeartbeatParams) {
    let HeartbeatParams {
        store,
        clock,
        lease,
        ttl,
        every,
        mut shutdown,
        stop,
        inbox,
        mut hints,
    } = params;
    let mut hints_open = true;
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut relayed_shutdown = false;
    loop {
        tokio::select! {
            _ = ticks.tick() => {
                match store.heartbeat(&lease, clock.now(), ttl).await {
                    Ok(LeaseStatus::Held) => inbox.ring(),
                    Ok(LeaseStatus::Lost) => {
                        tracing::info!(task_id = %lease.task_id, fence = lease.fence, "lease lost");
                        stop.send_replace(StopSignal::LeaseLost);
                        return;
                    }
                    // The lease may still be valid; the next beat (or the fenced commit) decides.
                    Err(error) => {
                        tracing::warn!(task_id = %lease.task_id, %error, "heartbeat failed");
                    }
                }
            }
            hint = hints.recv(), if hints_open => match hint {
                Ok(Wakeup::Message { task_id }) if task_id == lease.task_id => inbox.ring(),
                Ok(_) => {}
                // Hints were dropped: one of them may have been a message.
                Err(broadcast::error::RecvError::Lagged(_)) => inbox.ring(),
                Err(broadcast::error::RecvError::Closed) => hints_open = false,
            },
            // A dropped sender means the pool is gone: treat it as a shutdown too.
            _ = super::raised(&mut shutdown), if !relayed_shutdown => {
                relayed_shutdown = true;
                stop.send_if_modified(|signal| {
                    let run = *signal == StopSignal::Run;
                    if run {
                        *signal = StopSignal::Shutdown;
                    }
                    run
                });
            }
        }
    }
}
