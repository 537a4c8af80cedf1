//! Group commit: the concurrent workers' fenced writes, gathered into one statement each.
//!
//! Every [`Store::commit`](crate::store::Store::commit) of this process is handed to a writer
//! task and awaits its outcome. A writer takes whatever is queued when it is free (up to
//! [`MAX_BATCH`]) and applies it as ONE statement ([`super::commit`]), so while one batch is
//! in flight the next accumulates: at one worker a batch is a single commit, at eight the
//! transactions, round trips and WAL flushes are shared. Nothing is acknowledged before its
//! batch committed. Fencing stays per task: a member whose fence no longer matches comes back
//! `LeaseLost` alone and the others commit.
//!
//! Tasks are spread over the writers ([`DEFAULT_COMMIT_WRITERS`] unless configured) by id, so the commits of one task always go
//! through the same writer in the order they were made; a writer puts a second change of a task
//! already in its batch into the next one. A change whose caller stopped waiting before its
//! batch started is dropped unwritten, as a statement never sent would be. A batch that fails
//! for a reason that is not the database's passing trouble is retried member by member, so one
//! bad change fails alone; a passing fault (a reset connection) fails the whole batch, and each
//! member's caller sees it as a transient store error.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::commit::{self, Member};
use super::outbox::Outbox;
use crate::domain::task::TaskId;
use crate::store::{Commit, StoreError};

/// The most changes one statement carries.
const MAX_BATCH: usize = 64;
/// Writers per store by default (`CAIRN_DB_COMMIT_WRITERS`), each with a connection while
/// busy. Fewer writers make bigger batches (fewer transactions); more keep more of Postgres
/// busy while a batch waits for its WAL flush. On a CPU-bound Postgres one writer measured
/// fastest (docs/benchmarks.md: 1, 2, 4 and 8 writers side by side).
pub const DEFAULT_COMMIT_WRITERS: usize = 1;

/// How the group commit batched so far, for benchmarks and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupStats {
    /// Statements executed (batches, and members retried alone).
    pub statements: u64,
    /// Changes committed or refused through them.
    pub commits: u64,
}

type Reply = oneshot::Sender<Result<Commit, StoreError>>;

struct Pending {
    member: Member,
    reply: Reply,
}

#[derive(Debug, Default)]
struct Counters {
    statements: AtomicU64,
    commits: AtomicU64,
}

/// The writers' queues; dropping it stops them.
#[derive(Debug)]
pub(super) struct GroupCommit {
    queues: Vec<mpsc::UnboundedSender<Pending>>,
    counters: Arc<Counters>,
    writers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("task_id", &self.member.lease.task_id)
            .finish()
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        for writer in &self.writers {
            writer.abort();
        }
    }
}

impl GroupCommit {
    pub(super) fn start(pool: PgPool, hints: Arc<Outbox>, writers_wanted: usize) -> Self {
        let counters = Arc::new(Counters::default());
        let mut queues = Vec::with_capacity(writers_wanted);
        let mut writers = Vec::with_capacity(writers_wanted);
        for _ in 0..writers_wanted.max(1) {
            let (queue, receiver) = mpsc::unbounded_channel();
            let writer = Writer {
                pool: pool.clone(),
                hints: hints.clone(),
                counters: counters.clone(),
                receiver,
                carried: VecDeque::new(),
                held: None,
            };
            queues.push(queue);
            writers.push(tokio::spawn(writer.run()));
        }
        Self {
            queues,
            counters,
            writers,
        }
    }

    /// Queues `member` for the next batch of its writer and waits for the outcome.
    pub(super) async fn commit(&self, member: Member) -> Result<Commit, StoreError> {
        let count = self.queues.len().max(1) as u128;
        let shard = usize::try_from(member.lease.task_id.as_u128() % count).unwrap_or_default();
        let (reply, outcome) = oneshot::channel();
        let queue = self.queues.get(shard).ok_or_else(stopped)?;
        queue
            .send(Pending { member, reply })
            .map_err(|_| stopped())?;
        outcome.await.map_err(|_| stopped())?
    }

    pub(super) fn stats(&self) -> GroupStats {
        GroupStats {
            statements: self.counters.statements.load(Ordering::Relaxed),
            commits: self.counters.commits.load(Ordering::Relaxed),
        }
    }
}

/// The writer is gone (the store is shutting down): a passing fault for the caller.
fn stopped() -> StoreError {
    StoreError::Database(sqlx::Error::PoolClosed)
}

struct Writer {
    pool: PgPool,
    hints: Arc<Outbox>,
    counters: Arc<Counters>,
    receiver: mpsc::UnboundedReceiver<Pending>,
    /// Changes put off to a later batch (their task already had one in the batch).
    carried: VecDeque<Pending>,
    /// The connection, kept while more work is queued.
    held: Option<PoolConnection<Postgres>>,
}

impl Writer {
    async fn run(mut self) {
        while let Some(batch) = self.gather().await {
            let (members, replies): (Vec<Member>, Vec<Reply>) = batch
                .into_iter()
                .map(|pending| (pending.member, pending.reply))
                .unzip();
            let outcomes = self.write(&members).await;
            for (reply, outcome) in replies.into_iter().zip(outcomes) {
                // A caller that stopped waiting is told nothing; its change stands.
                let _ = reply.send(outcome);
            }
        }
    }

    /// The next batch: the put-off changes first, then whatever is queued, one per task, and
    /// only changes someone still waits for. `None` once the store is gone.
    async fn gather(&mut self) -> Option<Vec<Pending>> {
        let mut batch = Vec::new();
        let mut tasks: HashSet<TaskId> = HashSet::new();
        let mut later = VecDeque::new();
        while batch.len() < MAX_BATCH {
            let next = match self.carried.pop_front() {
                Some(pending) => pending,
                None if batch.is_empty() && later.is_empty() => self.receiver.recv().await?,
                None => match self.receiver.try_recv() {
                    Ok(pending) => pending,
                    Err(_) => break,
                },
            };
            if next.reply.is_closed() {
                continue;
            }
            if tasks.insert(next.member.lease.task_id) {
                batch.push(next);
            } else {
                later.push_back(next);
            }
        }
        later.extend(self.carried.drain(..));
        self.carried = later;
        Some(batch)
    }

    /// One outcome per member, in order.
    async fn write(&mut self, members: &[Member]) -> Vec<Result<Commit, StoreError>> {
        if members.is_empty() {
            return Vec::new();
        }
        let mut conn = match self.held.take() {
            Some(conn) => conn,
            None => match self.pool.acquire().await {
                Ok(conn) => conn,
                Err(error) => return fan_out(StoreError::from(error), members.len()),
            },
        };
        self.count(members.len());
        let outcomes = match commit::apply(&mut conn, &self.hints, members).await {
            Ok(outcomes) => outcomes.into_iter().map(Ok).collect(),
            Err(error) if members.len() > 1 && !error.is_transient() => {
                tracing::warn!(%error, members = members.len(), "group commit failed; committing its members one by one");
                let mut outcomes = Vec::with_capacity(members.len());
                for member in members {
                    self.count(1);
                    let alone = commit::apply(&mut conn, &self.hints, std::slice::from_ref(member));
                    outcomes.push(alone.await.and_then(single));
                }
                outcomes
            }
            // The connection may be broken: it goes back to the pool, which tests it.
            Err(error) => return fan_out(error, members.len()),
        };
        if !self.receiver.is_empty() || !self.carried.is_empty() {
            self.held = Some(conn);
        }
        outcomes
    }

    fn count(&self, members: usize) {
        self.counters.statements.fetch_add(1, Ordering::Relaxed);
        self.counters
            .commits
            .fetch_add(members as u64, Ordering::Relaxed);
    }
}

/// The outcome of a batch of one.
fn single(outcomes: Vec<Commit>) -> Result<Commit, StoreError> {
    outcomes
        .into_iter()
        .next()
        .ok_or_else(|| StoreError::Corrupt("a commit returned no outcome".to_string()))
}

/// The batch's failure for each of its `members`: the error itself for the first, a copy that
/// keeps its transient-or-not nature for the others.
fn fan_out(error: StoreError, members: usize) -> Vec<Result<Commit, StoreError>> {
    let text = format!("group commit failed: {error}");
    let transient = error.is_transient();
    let mut outcomes = vec![Err(error)];
    outcomes.extend((1..members).map(|_| {
        let copy = if transient {
            sqlx::Error::Io(std::io::Error::other(text.clone()))
        } else {
            sqlx::Error::Configuration(text.clone().into())
        };
        Err(StoreError::Database(copy))
    }));
    outcomes
}
