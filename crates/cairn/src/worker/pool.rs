//! The worker pool: `workers` loops that take a permit, claim a task, run the engine under a
//! heartbeat, and settle whatever the engine leaves behind.
//!
//! Shutdown happens in two stages. First the pool closes its permits (no loop claims again) and
//! raises the shutdown flag: idle loops exit, running engines are told to stop at their next
//! durable point and yield, and each yielded task is released (`queued`, lease cleared,
//! `task.released`). When the grace period runs out, engines still running are aborted and
//! their tasks released the same way; a step that was in flight is simply redone by the next
//! attempt, since only committed steps count.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::{Semaphore, broadcast, watch};
use tokio::task::JoinSet;
use tracing::Instrument;

use super::lease::{HeartbeatParams, spawn_heartbeat};
use super::params::PoolParams;
use crate::domain::event::{NewEvent, kinds};
use crate::domain::task::{Strategy, TaskStatus};
use crate::engine::{EngineError, Inbox, RunContext, RunOutcome, StopSignal};
use crate::store::{Change, Claimed, Commit, Wakeup, retry_transient};

/// How a shutdown went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Every engine reached a durable point within the grace period.
    pub drained: bool,
}

/// A running pool. Dropping it aborts the loops without releasing leases (the reaper then
/// requeues them after they expire); call [`WorkerPool::shutdown`] to stop cleanly.
pub struct WorkerPool {
    shutdown: watch::Sender<bool>,
    hard_stop: watch::Sender<bool>,
    permits: Arc<Semaphore>,
    loops: JoinSet<()>,
}

/// What each loop shares with its siblings.
#[derive(Clone)]
struct Shared {
    params: PoolParams,
    permits: Arc<Semaphore>,
    shutdown: watch::Receiver<bool>,
    hard_stop: watch::Receiver<bool>,
}

impl WorkerPool {
    pub fn start(params: PoolParams) -> WorkerPool {
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (hard_stop, hard_stop_rx) = watch::channel(false);
        let permits = Arc::new(Semaphore::new(params.workers));
        let mut loops = JoinSet::new();
        for index in 0..params.workers {
            // Subscribing before the first claim means no hint is missed between an empty
            // claim and the idle wait that follows it.
            let wakeups = params.store.subscribe();
            let shared = Shared {
                params: params.clone(),
                permits: permits.clone(),
                shutdown: shutdown_rx.clone(),
                hard_stop: hard_stop_rx.clone(),
            };
            loops.spawn(worker_loop(shared, index, wakeups));
        }
        tracing::info!(
            workers = params.workers,
            worker_id = %params.worker_id,
            max_running_per_tenant = params.max_running_per_tenant.map_or(0, NonZeroU32::get),
            "worker pool started"
        );
        WorkerPool {
            shutdown,
            hard_stop,
            permits,
            loops,
        }
    }

    /// Stops claiming, lets engines yield within `grace`, releases every lease this pool holds.
    pub async fn shutdown(mut self, grace: Duration) -> ShutdownReport {
        self.permits.close();
        self.shutdown.send_replace(true);
        let drained = join_all(&mut self.loops, grace).await;
        if !drained {
            tracing::warn!(
                grace_ms = grace.as_millis() as u64,
                "engines still running after the grace period; aborting them and releasing their tasks"
            );
            self.hard_stop.send_replace(true);
            // Releasing is one short commit per task; bound it so a dead database cannot hang
            // the exit. Unreleased leases expire and are reaped by the next process.
            if !join_all(&mut self.loops, Duration::from_secs(5)).await {
                self.loops.abort_all();
            }
        }
        ShutdownReport { drained }
    }
}

/// Waits for every loop to end, up to `limit`; true when they all did.
async fn join_all(loops: &mut JoinSet<()>, limit: Duration) -> bool {
    let all = async { while loops.join_next().await.is_some() {} };
    tokio::time::timeout(limit, all).await.is_ok()
}

async fn worker_loop(shared: Shared, index: usize, mut wakeups: broadcast::Receiver<Wakeup>) {
    let params = &shared.params;
    let lease_ttl = chrono_duration(params.lease_ttl);
    loop {
        // A closed semaphore is the signal to stop claiming.
        let Ok(permit) = shared.permits.clone().acquire_owned().await else {
            break;
        };
        if *shared.shutdown.borrow() {
            break;
        }
        // The claim sees every row committed before it, so hints queued until now (say, while
        // an engine ran) carry nothing new; only hints arriving after this point can.
        drain(&mut wakeups);
        let claimed = super::spend::claim(params, lease_ttl).await;
        match claimed {
            Ok(Some(claimed)) => {
                run_claimed(&shared, claimed).await;
                drop(permit);
            }
            Ok(None) => {
                drop(permit);
                if !idle_wait(&shared, &mut wakeups).await {
                    break;
                }
            }
            Err(error) => {
                drop(permit);
                tracing::warn!(worker = index, %error, "claim failed; retrying after the poll interval");
                if !idle_wait(&shared, &mut wakeups).await {
                    break;
                }
            }
        }
    }
    tracing::debug!(worker = index, "worker loop stopped");
}

fn drain(wakeups: &mut broadcast::Receiver<Wakeup>) {
    use broadcast::error::TryRecvError;
    while !matches!(
        wakeups.try_recv(),
        Err(TryRecvError::Empty | TryRecvError::Closed)
    ) {}
}

/// Sleeps until a runnable hint, the poll interval, or shutdown. False means shut down.
async fn idle_wait(shared: &Shared, wakeups: &mut broadcast::Receiver<Wakeup>) -> bool {
    let deadline = tokio::time::Instant::now() + shared.params.poll_interval;
    let mut shutdown = shared.shutdown.clone();
    let mut hints_open = true;
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(deadline) => return true,
            _ = super::raised(&mut shutdown) => return false,
            hint = wakeups.recv(), if hints_open => match hint {
                Ok(Wakeup::TaskRunnable) | Err(broadcast::error::RecvError::Lagged(_)) => return true,
                Ok(Wakeup::Events { .. } | Wakeup::Message { .. }) => {}
                // No more hints will come; polling alone carries on.
                Err(broadcast::error::RecvError::Closed) => hints_open = false,
            },
        }
    }
}

/// Runs the engine on a claimed task under a heartbeat, then settles its outcome.
async fn run_claimed(shared: &Shared, claimed: Claimed) {
    let params = &shared.params;
    let Claimed { task, lease, state } = claimed;
    let (task_id, strategy) = (task.id, task.strategy);
    tracing::info!(%task_id, fence = lease.fence, attempt = task.attempts, "claimed task");
    let initial = if *shared.shutdown.borrow() {
        StopSignal::Shutdown
    } else {
        StopSignal::Run
    };
    let (stop_tx, stop_rx) = watch::channel(initial);
    let inbox = Inbox::new();
    let heartbeat = spawn_heartbeat(HeartbeatParams {
        store: params.store.clone(),
        clock: params.clock.clone(),
        lease: lease.clone(),
        ttl: chrono_duration(params.lease_ttl),
        every: params.heartbeat,
        shutdown: shared.shutdown.clone(),
        stop: stop_tx,
        inbox: inbox.clone(),
        hints: params.store.subscribe(),
    });
    let ctx = RunContext {
        task,
        lease: lease.clone(),
        state,
        store: params.store.clone(),
        clock: params.clock.clone(),
        stop: stop_rx,
        inbox,
        meters: params.meters.clone(),
    };
    let engine = params.engine.clone();
    let budget = ctx.task.budget;
    let span = crate::traces::Workflow {
        task_id: &task_id.to_string(),
        strategy: strategy.as_str(),
        attempt: i64::from(ctx.task.attempts),
        budget_tokens: budget.tokens,
        budget_tool_calls: budget.tool_calls,
        budget_wall_ms: budget.wall_ms,
    }
    .span();
    // A separate task, so an engine panic fails one task instead of killing this loop.
    let mut run = tokio::spawn(async move { engine.run(ctx).await }.instrument(span.clone()));
    let result = tokio::select! {
        joined = &mut run => joined.unwrap_or_else(|error| {
            Err(EngineError::Other(format!("engine task ended abnormally: {error}")))
        }),
        () = flag_raised(shared.hard_stop.clone()) => {
            run.abort();
            let _ = run.await;
            Ok(RunOutcome::Yielded)
        }
    };
    heartbeat.abort();
    let (outcome, ok) = match &result {
        Ok(RunOutcome::Finished(status)) => (status.as_str(), *status == TaskStatus::Succeeded),
        Ok(RunOutcome::Yielded) => ("yielded", true),
        Ok(RunOutcome::Parked) => ("awaiting_approval", true),
        Ok(RunOutcome::Deferred(_)) => ("deferred", true),
        Ok(RunOutcome::LeaseLost) => ("lease_lost", false),
        Err(_) => ("engine_error", false),
    };
    crate::traces::workflow_ended(&span, outcome, ok);
    drop(span);
    settle(params, &lease, strategy, result).await;
}

/// Resolves once the flag is true; never, if its sender is gone without raising it.
async fn flag_raised(mut flag: watch::Receiver<bool>) {
    if !super::raised(&mut flag).await {
        std::future::pending::<()>().await;
    }
}

/// Writes what the engine could not: a release after a yield or after a passing store fault,
/// a failure after an error of the task's own.
///
/// A store fault (a connection reset, a database restart, a full pool) says nothing about the
/// task, so the task is handed back to the queue and resumes from its last commit; the release
/// itself is retried until the lease would have expired anyway (then the reaper requeues it).
async fn settle(
    params: &PoolParams,
    lease: &crate::domain::task::Lease,
    strategy: Strategy,
    result: Result<RunOutcome, EngineError>,
) {
    let task_id = lease.task_id;
    let change = match result {
        Ok(RunOutcome::Finished(status)) => {
            tracing::info!(%task_id, status = status.as_str(), "task finished");
            return;
        }
        Ok(RunOutcome::LeaseLost) => {
            tracing::info!(%task_id, fence = lease.fence, "stopped: lease lost");
            return;
        }
        Ok(RunOutcome::Parked) => {
            tracing::info!(%task_id, "waiting for approval; no worker holds it");
            return;
        }
        Ok(RunOutcome::Yielded) => release(params, ReleaseReason::Shutdown, None),
        Ok(RunOutcome::Deferred(until)) => super::spend::deferred(params, task_id, until),
        Err(error) if error.is_transient() => {
            tracing::warn!(%task_id, %error, "store fault interrupted the task; handing it back to the queue");
            release(params, ReleaseReason::StoreFault, Some(&error))
        }
        Err(error) => {
            tracing::error!(%task_id, %error, "engine failed; failing the task");
            let report = json!({ "reason": "engine_error", "error": error.to_string() });
            Change {
                status: Some(TaskStatus::Failed),
                result: Some(report.clone()),
                events: vec![NewEvent::new(kinds::TASK_FAILED, report)],
                ..Change::default()
            }
        }
    };
    commit_settlement(params, lease, strategy, change).await;
}

/// Why a task went back to the queue (the `reason` of `task.released`).
#[derive(Debug, Clone, Copy)]
enum ReleaseReason {
    Shutdown,
    StoreFault,
}

impl ReleaseReason {
    fn as_str(self) -> &'static str {
        match self {
            ReleaseReason::Shutdown => "shutdown",
            ReleaseReason::StoreFault => "store_fault",
        }
    }
}

fn release(params: &PoolParams, reason: ReleaseReason, error: Option<&EngineError>) -> Change {
    let mut data = json!({ "worker_id": params.worker_id, "reason": reason.as_str() });
    if let Some(error) = error {
        data["error"] = json!(error.to_string());
    }
    Change {
        status: Some(TaskStatus::Queued),
        release: true,
        events: vec![NewEvent::new(kinds::TASK_RELEASED, data)],
        ..Change::default()
    }
}

/// Commits the settlement, retrying store faults with backoff for at most one lease TTL.
async fn commit_settlement(
    params: &PoolParams,
    lease: &crate::domain::task::Lease,
    strategy: Strategy,
    change: Change,
) {
    let task_id = lease.task_id;
    let released = change.release;
    let tally = params.meters.tally(strategy.as_str(), &change.events);
    // Safe to repeat: once a settlement applied, the lease is gone and a repeat is LeaseLost.
    let committed = retry_transient(params.lease_ttl, || {
        params
            .store
            .commit(lease, change.clone(), params.clock.now())
    })
    .await;
    match committed {
        Ok(Commit::Applied { .. }) if released => tracing::info!(%task_id, "task released"),
        Ok(Commit::Applied { .. }) => tally.count(),
        Ok(Commit::LeaseLost) => tracing::info!(%task_id, "lease already lost; nothing to settle"),
        // The lease will expire and the reaper requeues the task.
        Err(error) => tracing::error!(%task_id, %error, "could not settle task"),
    }
}

fn chrono_duration(duration: Duration) -> chrono::Duration {
    chrono::Duration::from_std(duration).unwrap_or(chrono::Duration::MAX)
}
