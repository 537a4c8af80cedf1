//! Group commit: the concurrent workers' fenced writes (and the API's task creations), gathered
//! into one statement each.
//!
//! Every [`Store::commit`](crate::store::Store::commit) of this process is handed to a writer
//! task and awaits its outcome; so is every creation without an idempotency key
//! ([`super::tasks`]), through a writer of its own ([`Batch`] says what a kind of write is).
//! A writer takes whatever is queued when it is free (up to [`MAX_BATCH`]) and applies it as
//! ONE statement ([`super::commit`], [`super::tasks`]), so while one batch is
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
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::outbox::Outbox;
use crate::domain::task::TaskId;
use crate::store::StoreError;

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

/// One kind of batched write: its member, its outcome, and the statement applying a batch.
pub(super) trait Batch: Send + Sync + 'static {
    type Member: Send + Sync + 'static;
    type Outcome: Send + 'static;
    /// Members with the same key never share a batch, and are written in the order submitted.
    fn key(member: &Self::Member) -> TaskId;
    /// Applies `members` in one statement on `conn`: one outcome per member, in order.
    fn apply(
        conn: &mut PgConnection,
        hints: &Outbox,
        members: &[Self::Member],
    ) -> impl Future<Output = Result<Vec<Self::Outcome>, StoreError>> + Send;
}

type Reply<B> = oneshot::Sender<Result<<B as Batch>::Outcome, StoreError>>;

struct Pending<B: Batch> {
    member: B::Member,
    reply: Reply<B>,
}

#[derive(Debug, Default)]
struct Counters {
    statements: AtomicU64,
    commits: AtomicU64,
}

/// The writers' queues; dropping it stops them.
pub(super) struct GroupCommit<B: Batch> {
    queues: Vec<mpsc::UnboundedSender<Pending<B>>>,
    counters: Arc<Counters>,
    writers: Vec<JoinHandle<()>>,
}

impl<B: Batch> std::fmt::Debug for GroupCommit<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit")
            .field("writers", &self.writers.len())
            .field("counters", &self.counters)
            .finish()
    }
}

impl<B: Batch> Drop for GroupCommit<B> {
    fn drop(&mut self) {
        for writer in &self.writers {
            writer.abort();
        }
    }
}

impl<B: Batch> GroupCommit<B> {
    pub(super) fn start(pool: PgPool, hints: Arc<Outbox>, writers_wanted: usize) -> Self {
        let counters = Arc::new(Counters::default());
        let mut queues = Vec::with_capacity(writers_wanted);
        let mut writers = Vec::with_capacity(writers_wanted);
        for _ in 0..writers_wanted.max(1) {
            let (queue, receiver) = mpsc::unbounded_channel();
            let writer = Writer::<B> {
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
    pub(super) async fn submit(&self, member: B::Member) -> Result<B::Outcome, StoreError> {
        let count = self.queues.len().max(1) as u128;
        let shard = usize::try_from(B::key(&member).as_u128() % count).unwrap_or_default();
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

struct Writer<B: Batch> {
    pool: PgPool,
    hints: Arc<Outbox>,
    counters: Arc<Counters>,
    receiver: mpsc::UnboundedReceiver<Pending<B>>,
    /// Changes put off to a later batch (their task already had one in the batch).
    carried: VecDeque<Pending<B>>,
    /// The connection, kept while more work is queued.
    held: Option<PoolConnection<Postgres>>,
}

impl<B: Batch> Writer<B> {
    async fn run(mut self) {
        while let Some(batch) = self.gather().await {
            let (members, replies): (Vec<B::Member>, Vec<Reply<B>>) = batch
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
    async fn gather(&mut self) -> Option<Vec<Pending<B>>> {
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
            if tasks.insert(B::key(&next.member)) {
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
    async fn write(&mut self, members: &[B::Member]) -> Vec<Result<B::Outcome, StoreError>> {
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
        let outcomes = match B::apply(&mut conn, &self.hints, members).await {
            Ok(outcomes) => outcomes.into_iter().map(Ok).collect(),
            Err(error) if members.len() > 1 && !error.is_transient() => {
                tracing::warn!(%error, members = members.len(), "group commit failed; committing its members one by one");
                let mut outcomes = Vec::with_capacity(members.len());
                for member in members {
                    // A statement more, not a change more: each is counted once.
                    self.counters.statements.fetch_add(1, Ordering::Relaxed);
                    let alone = B::apply(&mut conn, &self.hints, std::slice::from_ref(member));
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
pub(super) fn single<T>(outcomes: Vec<T>) -> Result<T, StoreError> {
    outcomes
        .into_iter()
        .next()
        .ok_or_else(|| StoreError::Corrupt("a batched write returned no outcome".to_string()))
}

/// The batch's failure for each of its `members`: the error itself for the first, a copy that
/// keeps its transient-or-not nature for the others.
fn fan_out<T>(error: StoreError, members: usize) -> Vec<Result<T, StoreError>> {
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
