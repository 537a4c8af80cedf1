//! Durable state behind one trait, with a Postgres and a SQLite implementation.
//!
//! Both backends pass the same conformance suite (`tests/store_conformance.rs`). The rules they
//! share:
//! - a state change and the event rows describing it commit in one transaction;
//! - per-task event `seq` values are assigned inside that transaction from `tasks.last_seq`, so
//!   they are dense and ordered;
//! - every worker write is fenced: applied only while `claimed_by` and `fence` still match the
//!   [`Lease`]; otherwise the outcome is [`Commit::LeaseLost`], a typed result rather than an error;
//! - time always comes from the caller's clock, never from the database;
//! - after commit the store publishes a [`Wakeup`] hint (Postgres: `NOTIFY`, reaching every
//!   replica; SQLite: in-process). Hints may be dropped: readers re-read rows after the last
//!   `seq` they saw.
//!
//! Each backend is laid out alike (`tasks`, `lease`, `commit`, `history`, `rows`, `schema`,
//! `spend`, and `mod`'s [`Store`] impl delegating to them); rules that do not depend on SQL (a
//! commit's effect on status, cancel, idempotency replay, page bounds, hints) live in `rules`.

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::broadcast;
use utoipa::ToSchema;

use crate::domain::event::Event;
use crate::domain::task::{Lease, NewTask, Task, TaskId, TaskStatus};
use keys::{ApiKey, NewApiKey, NewStreamToken, StoredApiKey, StreamToken};

pub mod approvals;
mod change;
mod claim;
pub use change::{Change, Claimed, Commit, LeaseStatus, StateJson};
mod fault;
pub mod keys;

/// Connections of `pool` checked out now (open ones less the idle), for
/// [`Store::connections_in_use`].
fn pool_in_use<DB: sqlx::Database>(pool: &sqlx::Pool<DB>) -> u32 {
    let idle = u32::try_from(pool.num_idle()).unwrap_or(u32::MAX);
    pool.size().saturating_sub(idle)
}
mod node;
pub use claim::ClaimParams;
pub use fault::{RETRY_BUDGET, retry_transient};
pub use node::{NodeLock, node_key};
mod messages;
pub use messages::{PostMessage, PostOutcome};
mod migrations;
pub mod postgres;
mod records;
mod rules;
pub use records::{
    Artifact, LedgerEntry, NewArtifact, NewLedgerEntry, NewPlanVersion, NewToolReceipt,
    PlanVersionRecord, SpendHour, ToolReceipt,
};
mod open;
pub mod sqlite;
pub use open::{StoreSettings, open};

/// Failures of the store itself. Lost leases and idempotency conflicts are outcomes the caller
/// must handle, so they are typed rather than hidden in a database error.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("idempotency key already used with a different request body")]
    IdempotencyConflict { existing_task: TaskId },
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

/// Which backend a store is; shown by `/readyz` and at start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    Postgres,
    Sqlite,
}

/// A client's `Idempotency-Key` and the hash of the request it came with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyClaim {
    pub key: String,
    pub request_hash: String,
}

/// The result of `create_task`: the task, and whether this call created it (false when an
/// idempotency key replayed an earlier creation).
#[derive(Debug, Clone, PartialEq)]
pub struct Created {
    pub task: Task,
    pub created: bool,
}

/// Filters and keyset cursor for listing tasks, newest first (UUIDv7 ids: the cursor is the last).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskQuery {
    pub status: Option<TaskStatus>,
    /// Only tasks with an id strictly lower than this one.
    pub before: Option<TaskId>,
    pub limit: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum CancelOutcome {
    NotFound,
    /// The task had already ended; nothing was written.
    AlreadyTerminal(Task),
    /// The task is now cancelled; a running worker's lease was revoked (its fence bumped).
    Cancelled(Task),
}

/// A hint that something changed. Receivers re-read rows; a hint is never the data itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wakeup {
    /// Events up to `last_seq` were committed for `task_id`.
    Events { task_id: TaskId, last_seq: i64 },
    /// A task became claimable (created, released or requeued).
    TaskRunnable,
    /// A person sent `task_id` a message (this process only: another replica's worker finds it
    /// at its next heartbeat).
    Message { task_id: TaskId },
}

/// cairn's durable state. See the module docs for the rules every implementation follows.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    fn backend(&self) -> Backend;

    /// Applies pending migrations.
    async fn migrate(&self) -> Result<(), StoreError>;

    /// A cheap round trip, for `/readyz`.
    async fn ping(&self) -> Result<(), StoreError>;

    /// Database connections checked out of the pool now, for `GET /metrics`; `None` where
    /// the backend cannot tell.
    fn connections_in_use(&self) -> Option<u32> {
        None
    }

    /// Inserts the task and its `task.created` event (seq 1) in one transaction. With an
    /// idempotency claim: the same key and hash return the existing task (`created: false`);
    /// the same key with another hash is [`StoreError::IdempotencyConflict`] and writes nothing.
    /// Idempotency keys are per tenant: the same key in two tenants names two tasks.
    async fn create_task(
        &self,
        new: NewTask,
        idempotency: Option<IdempotencyClaim>,
        now: DateTime<Utc>,
    ) -> Result<Created, StoreError> {
        self.create_task_by(new, idempotency, None, now).await
    }

    /// [`Store::create_task`], recording who asked (`by`: an API key id, never a secret) in the
    /// `task.created` event's data.
    async fn create_task_by(
        &self,
        new: NewTask,
        idempotency: Option<IdempotencyClaim>,
        by: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Created, StoreError>;

    async fn get_task(&self, tenant_id: &str, id: TaskId) -> Result<Option<Task>, StoreError>;

    /// The engine's latest checkpoint of a tenant's task, as committed (`None` when the task
    /// does not exist or was never checkpointed): what the task's progress is read from.
    async fn get_checkpoint(
        &self,
        tenant_id: &str,
        id: TaskId,
    ) -> Result<Option<Value>, StoreError>;

    /// Tasks of a tenant, newest first, at most `query.limit`.
    async fn list_tasks(&self, tenant_id: &str, query: &TaskQuery)
    -> Result<Vec<Task>, StoreError>;

    /// Cancels a queued or running task with a `task.cancelled` event; bumps the fence so a
    /// running worker's next write is refused.
    async fn cancel_task(
        &self,
        tenant_id: &str,
        id: TaskId,
        now: DateTime<Utc>,
    ) -> Result<CancelOutcome, StoreError> {
        self.cancel_task_by(tenant_id, id, None, now).await
    }

    /// [`Store::cancel_task`], recording who asked (`by`: an API key id) in the
    /// `task.cancelled` event's data.
    async fn cancel_task_by(
        &self,
        tenant_id: &str,
        id: TaskId,
        by: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<CancelOutcome, StoreError>;

    /// Commits a message to a queued or running task (numbered after the task's earlier
    /// messages); refuses an ended task and one at `limit`. Writes no event: the engine
    /// records `task.message` when it takes the message.
    async fn post_message(&self, post: PostMessage<'_>) -> Result<PostOutcome, StoreError>;

    /// A task's messages numbered after `after`, in order.
    async fn list_messages(
        &self,
        tenant_id: &str,
        task_id: TaskId,
        after: u32,
    ) -> Result<Vec<crate::domain::message::TaskMessage>, StoreError>;

    /// Parks a running task on an approval request, fenced like [`Store::commit`]: stores the
    /// request (numbered after the task's earlier ones), records `approval.requested`, moves
    /// the task to `awaiting_approval` and clears its lease, in one transaction.
    async fn park(
        &self,
        lease: &Lease,
        park: approvals::Park,
        now: DateTime<Utc>,
    ) -> Result<approvals::Parked, StoreError>;

    /// A tenant's task's approval requests, oldest first.
    async fn list_approvals(
        &self,
        tenant_id: &str,
        task_id: TaskId,
    ) -> Result<Vec<crate::domain::approval::Approval>, StoreError>;

    /// Decides a pending request of a waiting task whose digest matches, records
    /// `approval.decided` (with the deciding key id) and queues the task again; anything else
    /// writes nothing and says why.
    async fn decide_approval(
        &self,
        decide: approvals::Decide<'_>,
    ) -> Result<approvals::DecideOutcome, StoreError>;

    /// Fails every waiting task whose pending request expired before `now` (`approval.expired`
    /// then `task.failed`, with a report); returns their ids. Run by the reaper.
    async fn expire_approvals(&self, now: DateTime<Utc>) -> Result<Vec<TaskId>, StoreError>;

    // The reads below are scoped by tenant like the task reads: a task of another tenant has
    // no events, plan versions, ledger entries or artifacts.

    /// Events of a task with `seq > after_seq`, in order, at most `limit`.
    async fn list_events(
        &self,
        tenant_id: &str,
        task_id: TaskId,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<Event>, StoreError>;

    async fn list_plan_versions(
        &self,
        tenant_id: &str,
        task_id: TaskId,
    ) -> Result<Vec<PlanVersionRecord>, StoreError>;

    async fn get_plan_version(
        &self,
        tenant_id: &str,
        task_id: TaskId,
        version: i32,
    ) -> Result<Option<PlanVersionRecord>, StoreError>;

    async fn list_ledger_entries(
        &self,
        tenant_id: &str,
        task_id: TaskId,
    ) -> Result<Vec<LedgerEntry>, StoreError>;

    async fn list_artifacts(
        &self,
        tenant_id: &str,
        task_id: TaskId,
    ) -> Result<Vec<Artifact>, StoreError>;

    /// Claims one queued task (oldest first): status `running`, a new lease until
    /// `now + lease_ttl`, `fence + 1`, `attempts + 1`, and a `task.claimed` event. On Postgres
    /// this uses `FOR UPDATE SKIP LOCKED`, so concurrent claimers never collide.
    ///
    /// With `max_running_per_tenant`, the oldest queued task whose tenant has fewer running
    /// tasks than the cap; a tenant at its cap keeps its tasks queued. Concurrent claimers on
    /// any number of stores never take a tenant past the cap (Postgres serialises the capped
    /// claims of one tenant on an advisory lock; SQLite's claims are serialised anyway).
    async fn claim(&self, params: ClaimParams<'_>) -> Result<Option<Claimed>, StoreError>;

    /// Money charged per tenant (one, or all with `None`) and hour (UTC), from `since`'s hour on,
    /// oldest first: kept by the commits that book the charges, so exactly their sum.
    async fn spend(
        &self,
        tenant_id: Option<&str>,
        since: DateTime<Utc>,
    ) -> Result<Vec<SpendHour>, StoreError>;

    /// Tenants (one, or all with `None`) with a queued task waiting for its spend period's end
    /// (`not_before` later than `now`), each with the latest such time.
    async fn spend_waits(
        &self,
        tenant_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, DateTime<Utc>)>, StoreError>;

    /// Extends a held lease to `now + lease_ttl`.
    async fn heartbeat(
        &self,
        lease: &Lease,
        now: DateTime<Utc>,
        lease_ttl: Duration,
    ) -> Result<LeaseStatus, StoreError>;

    /// Applies a [`Change`] if the lease still holds, in one transaction.
    async fn commit(
        &self,
        lease: &Lease,
        change: Change,
        now: DateTime<Utc>,
    ) -> Result<Commit, StoreError>;

    /// Requeues every running task whose lease expired before `now`, each with a
    /// `task.lease_expired` event; returns their ids. Also run at start-up: that is how tasks of
    /// a crashed process resume.
    async fn reap_expired(&self, now: DateTime<Utc>) -> Result<Vec<TaskId>, StoreError>;

    /// Takes the lock of `node` (see [`NodeLock`]); `None` when a live process holds it.
    async fn lock_node(&self, node: &str) -> Result<Option<NodeLock>, StoreError>;

    /// Requeues every running task whose `claimed_by` starts with `prefix`, each with a
    /// `task.released` event (reason `owner_restarted`); returns their ids. Only for the
    /// holder of the node's lock, at start-up: the workers of that prefix are dead.
    async fn reclaim_node(
        &self,
        prefix: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<TaskId>, StoreError>;

    /// The receipt of `task_id`'s call with this key (a key another task holds is not this
    /// task's: receipts are scoped by task, and so by tenant).
    async fn get_receipt(
        &self,
        task_id: TaskId,
        idempotency_key: &str,
    ) -> Result<Option<ToolReceipt>, StoreError>;

    /// Stores a receipt; if one already exists for the key, keeps and returns the first.
    async fn put_receipt(
        &self,
        receipt: NewToolReceipt,
        now: DateTime<Utc>,
    ) -> Result<ToolReceipt, StoreError>;

    /// Removes `task_id`'s receipt under this key, if any (an MCP call's intent whose call is
    /// known not to have happened, so it may be sent again).
    async fn delete_receipt(
        &self,
        task_id: TaskId,
        idempotency_key: &str,
    ) -> Result<(), StoreError>;

    /// Stores a new API key (its secret's hash only).
    async fn create_api_key(
        &self,
        new: NewApiKey,
        now: DateTime<Utc>,
    ) -> Result<ApiKey, StoreError>;

    /// A key by id, revoked or not, with its secret's hash.
    async fn get_api_key(&self, id: &str) -> Result<Option<StoredApiKey>, StoreError>;

    /// Every key, oldest first.
    async fn list_api_keys(&self) -> Result<Vec<ApiKey>, StoreError>;

    /// Marks a key revoked (a second revoke keeps the first time); `None` for an unknown id.
    async fn revoke_api_key(
        &self,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<ApiKey>, StoreError>;

    /// Whether any key was ever created (revoked ones count: revoking every key must not turn
    /// authentication off).
    async fn has_api_keys(&self) -> Result<bool, StoreError>;

    /// Stores a stream token and deletes the ones that expired before `now`.
    async fn create_stream_token(
        &self,
        token: NewStreamToken,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// A stream token by the hash of the token, expired or not.
    async fn get_stream_token(&self, token_hash: &str) -> Result<Option<StreamToken>, StoreError>;

    /// Wake-up hints from this store (and, on Postgres, from every replica on the database).
    fn subscribe(&self) -> broadcast::Receiver<Wakeup>;
}
