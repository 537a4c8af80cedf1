//! Lease heartbeats for one running task.
//!
//! While an engine runs, a heartbeat task extends the lease every `every` and relays two
//! things to the engine through its [`StopSignal`] watch: a lost lease (the reaper requeued the
//! task, or it was cancelled: the fence moved) and the process shutting down. It keeps
//! heartbeating during shutdown, because the engine still needs its lease to reach a durable
//! point and to release the task cleanly.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::clock::Clock;
use crate::domain::task::Lease;
use crate::engine::StopSignal;
use crate::store::{LeaseStatus, Store};

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
    } = params;
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut relayed_shutdown = false;
    loop {
        tokio::select! {
            _ = ticks.tick() => {
                match store.heartbeat(&lease, clock.now(), ttl).await {
                    Ok(LeaseStatus::Held) => {}
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
