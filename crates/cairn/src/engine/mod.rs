//! Engines drive a claimed task through durable steps.
//!
//! The worker pool owns leases, heartbeats and shutdown; an [`Engine`] owns what a task *does*.
//! The contract between them is small on purpose, so the planning engine can replace the
//! [`minimal::MinimalEngine`] without touching the pool:
//!
//! - the engine gets a [`RunContext`]: the claimed [`Task`], its [`Lease`], the last checkpoint
//!   (`state`) written by an earlier attempt, the store, the clock and a [`StopSignal`] watch;
//! - every write goes through [`RunContext::commit`], a fenced [`Store::commit`]: one
//!   transaction holding the state change, its checkpoint and its event rows. A lost lease is
//!   a [`Halt::LeaseLost`] that `?` carries straight out of the engine's step code;
//! - between durable steps the engine checks [`RunContext::stop_requested`]: on shutdown it
//!   returns [`RunOutcome::Yielded`] (the pool then releases the lease), on a lost lease
//!   [`RunOutcome::LeaseLost`] (someone else owns the task now; write nothing more).
//!
//! Work done after the last commit is simply redone by the next attempt, which resumes from the
//! checkpoint; that is why a step must be one commit.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::watch;

use crate::clock::Clock;
use crate::domain::task::{Lease, Task, TaskStatus};
use crate::engine::runtime::ports::ToolSpec;
use crate::meters::Meters;
use crate::store::{Change, Commit, Store, StoreError};

pub mod baselines;
pub mod dispatch;
pub mod minimal;
pub mod planner;
pub mod prompts;
pub mod rollout;
pub mod runtime;
pub mod schemas;
pub mod shadow;

/// Why the pool asks an engine to stop. `Run` means carry on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    Run,
    /// The process is shutting down: stop at the next durable point and yield.
    Shutdown,
    /// A heartbeat found the lease gone: stop at once, write nothing more.
    LeaseLost,
}

/// Whether a person may have sent the task a message since the engine last looked. The worker
/// rings it when the store announces a message for the task (at once in this process) and at
/// every heartbeat (a message committed through another replica); the engine looks at the
/// store only when it rang, so a step costs no extra read.
#[derive(Debug, Clone)]
pub struct Inbox(Arc<std::sync::atomic::AtomicBool>);

impl Inbox {
    /// Rung from the start: messages may have come while the task was queued.
    pub fn new() -> Inbox {
        Inbox(Arc::new(std::sync::atomic::AtomicBool::new(true)))
    }

    pub fn ring(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether it rang since the last look; the look silences it.
    pub fn take(&self) -> bool {
        self.0.swap(false, std::sync::atomic::Ordering::AcqRel)
    }
}

impl Default for Inbox {
    fn default() -> Self {
        Inbox::new()
    }
}

/// How a run ended when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// The engine committed this terminal status (with its event) itself.
    Finished(TaskStatus),
    /// The lease was lost; another worker (or a cancel) owns the task now.
    LeaseLost,
    /// Stopped at a durable point because of shutdown; the pool releases the lease.
    Yielded,
    /// Parked on an approval request (the engine committed `awaiting_approval` itself, which
    /// released the lease).
    Parked,
    /// Stopped before a call its tenant's spend cap for the period cannot cover: what was done
    /// is committed, and the pool hands the task back to the queue, not to be claimed before
    /// this time (the period's end).
    Deferred(chrono::DateTime<chrono::Utc>),
}

/// Failures an engine cannot turn into a task outcome itself.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The checkpoint written by an earlier attempt cannot be read back.
    #[error("unreadable checkpoint: {0}")]
    Checkpoint(String),
    #[error("{0}")]
    Other(String),
    /// A transition refused because an earlier one of the same attempt failed (the journal
    /// closes on a failed transition: `runtime::journal`); as transient as that failure was.
    #[error("an earlier transition of this attempt failed: {reason}")]
    Closed { reason: String, transient: bool },
}

impl EngineError {
    /// True when the failure is the database's passing trouble (see
    /// [`StoreError::is_transient`]), not the task's: the task goes back to the queue and
    /// resumes from its last commit instead of failing.
    pub fn is_transient(&self) -> bool {
        match self {
            EngineError::Store(error) => error.is_transient(),
            EngineError::Closed { transient, .. } => *transient,
            EngineError::Checkpoint(_) | EngineError::Other(_) => false,
        }
    }
}

/// What interrupts an engine's step code: either the lease is gone (an outcome, not a
/// failure) or a real error. Lets step code use `?` on fenced commits; [`Halt::settle`] turns
/// it back into the [`Engine::run`] result.
#[derive(Debug, thiserror::Error)]
pub enum Halt {
    #[error("lease lost")]
    LeaseLost,
    /// A call or a plan needs a person's sign-off: the attempt stops at once and parks the
    /// task (`runtime::approvals`).
    #[error("waiting for approval")]
    Parked,
    /// The tenant's spend cap for the period cannot cover the next call: the attempt stops
    /// and the task waits for the period's end ([`RunOutcome::Deferred`]).
    #[error("deferred to {0}: the tenant's spend cap for the period is reached")]
    Deferred(chrono::DateTime<chrono::Utc>),
    #[error(transparent)]
    Error(#[from] EngineError),
}

impl From<StoreError> for Halt {
    fn from(error: StoreError) -> Self {
        Halt::Error(EngineError::Store(error))
    }
}

impl Halt {
    /// Maps the result of halting step code to what [`Engine::run`] returns.
    pub fn settle(result: Result<RunOutcome, Halt>) -> Result<RunOutcome, EngineError> {
        match result {
            Ok(outcome) => Ok(outcome),
            Err(Halt::LeaseLost) => Ok(RunOutcome::LeaseLost),
            // Only an engine that parks returns this; anything else stops like a shutdown.
            Err(Halt::Parked) => Ok(RunOutcome::Yielded),
            Err(Halt::Deferred(until)) => Ok(RunOutcome::Deferred(until)),
            Err(Halt::Error(error)) => Err(error),
        }
    }
}

/// The sequence numbers a fenced commit gave its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Applied {
    pub first_seq: i64,
    pub last_seq: i64,
}

/// Everything an engine gets for one attempt at a task.
#[derive(Clone)]
pub struct RunContext {
    pub task: Task,
    pub lease: Lease,
    /// The checkpoint of the last committed step, `None` on a first attempt.
    pub state: Option<Value>,
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub stop: watch::Receiver<StopSignal>,
    /// Rings when a person may have sent the task a message ([`Inbox`]).
    pub inbox: Inbox,
    /// Counts what each commit recorded (steps, repairs, gate decisions, the end).
    pub meters: Meters,
}

impl RunContext {
    /// The tools this task may use: the registered ones, narrowed to the task's own list when
    /// its submitter gave one (a name no longer registered is simply not offered).
    pub fn offered_tools(&self, registered: Vec<ToolSpec>) -> BTreeMap<String, ToolSpec> {
        registered
            .into_iter()
            .filter(|spec| {
                self.task
                    .tools
                    .as_ref()
                    .is_none_or(|allowed| allowed.contains(&spec.name))
            })
            .map(|spec| (spec.name.clone(), spec))
            .collect()
    }

    /// One fenced write under this attempt's lease, at the clock's current time.
    pub async fn commit(&self, change: Change) -> Result<Applied, Halt> {
        let tally = self
            .meters
            .tally(self.task.strategy.as_str(), &change.events);
        match self
            .store
            .commit(&self.lease, change, self.clock.now())
            .await?
        {
            Commit::Applied {
                first_seq,
                last_seq,
            } => {
                tally.count();
                Ok(Applied {
                    first_seq,
                    last_seq,
                })
            }
            Commit::LeaseLost => Err(Halt::LeaseLost),
        }
    }

    /// The current stop request, `None` while the engine should keep going.
    pub fn stop_requested(&self) -> Option<StopSignal> {
        match *self.stop.borrow() {
            StopSignal::Run => None,
            signal => Some(signal),
        }
    }

    /// Resolves when a stop is requested (immediately if one already is). If the pool dropped
    /// its sender the engine is orphaned, which is treated as a shutdown.
    pub async fn stopped(&self) -> StopSignal {
        let mut stop = self.stop.clone();
        match stop.wait_for(|signal| *signal != StopSignal::Run).await {
            Ok(signal) => *signal,
            Err(_) => StopSignal::Shutdown,
        }
    }
}

/// A strategy for running a claimed task to a terminal status, one durable step at a time.
#[async_trait]
pub trait Engine: Send + Sync + 'static {
    /// Runs one attempt. Must write only through fenced commits, check the stop signal
    /// between durable steps, and resume from `ctx.state` when it is set.
    async fn run(&self, ctx: RunContext) -> Result<RunOutcome, EngineError>;
}
