//! The embedded store: one SQLite file, so `cairn serve` works on a fresh machine with no set-up.
//!
//! It is single-node by design (docs/architecture.md, "Storage"): scale-out is Postgres's job.
//! What it shares with Postgres is every rule in [`crate::store`], checked by the same conformance
//! suite. How SQLite meets them:
//! - WAL journal, so readers never block the writer and the writer never blocks readers;
//!   `synchronous = FULL`, so a committed transaction survives a crash of the process.
//! - Every write runs in a `BEGIN IMMEDIATE` transaction: it takes the write lock up front
//!   instead of upgrading a read lock mid-transaction, which is what deadlocks (`SQLITE_BUSY`
//!   that no busy timeout can cure) when two connections read-then-write at once. Writers then
//!   queue on the busy timeout. With one writer at a time, claiming in one
//!   `UPDATE ... WHERE id = (SELECT ... LIMIT 1)` is as collision-free as Postgres's
//!   `FOR UPDATE SKIP LOCKED`.
//! - Wake-ups go to an in-process broadcast channel: there are no other replicas to reach.
//!
//! Layout, mirroring `postgres/` file for file: [`schema`] embeds the migrations, [`tasks`]
//! serves the API's task rows (create with idempotency, get, list, cancel), [`lease`] claims,
//! heartbeats and reaps, [`commit`] applies fenced changes, [`history`] appends events and reads
//! the append-only tables and receipts, [`rows`] maps rows to domain types (and is the only place
//! that knows SQLite's encoding of times, uuids and JSON). The rules both backends share live in
//! `crate::store::rules`. No file is SQLite-only; Postgres's `notify` and `outbox` have no
//! counterpart here because hints stay in-process (see [`SqliteStore::publish`]).

use std::path::Path;
use std::time::Duration as StdDuration;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Sqlite, Transaction};
use tokio::sync::broadcast;

use super::{
    Artifact, Backend, CancelOutcome, Change, ClaimParams, Claimed, Commit, Created,
    IdempotencyClaim, LeaseStatus, LedgerEntry, NewToolReceipt, NodeLock, PlanVersionRecord,
    SpendHour, Store, StoreError, TaskQuery, ToolReceipt, Wakeup,
};
use crate::domain::event::Event;
use crate::domain::task::{Lease, NewTask, Task, TaskId};
use crate::store::keys::{ApiKey, NewApiKey, NewStreamToken, StoredApiKey, StreamToken};

mod approvals;
mod commit;
mod history;
mod keys;
mod lease;
mod messages;
mod rows;
mod schema;
mod spend;
mod tasks;

/// How long a writer waits for the write lock before giving up with `SQLITE_BUSY`.
const BUSY_TIMEOUT: StdDuration = StdDuration::from_secs(10);
/// Readers run concurrently under WAL; writes serialize on the file lock regardless.
const MAX_CONNECTIONS: u32 = 8;
/// Wake-ups are hints: a lagging receiver loses some and re-reads rows, so a small ring is enough.
const WAKEUP_CAPACITY: usize = 1024;

/// The embedded SQLite store. Cloning shares the pool and the wake-up channel.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    wakeups: broadcast::Sender<Wakeup>,
    /// The database file (node locks live beside it).
    path: std::path::PathBuf,
}

impl SqliteStore {
    /// Opens (creating if needed, with its parent directories) the SQLite file at `path`.
    /// Does not migrate.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|err| StoreError::Database(sqlx::Error::Io(err)))?;
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        let pool = SqlitePoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options)
            .await?;
        let (wakeups, _) = broadcast::channel(WAKEUP_CAPACITY);
        Ok(Self {
            pool,
            wakeups,
            path: path.to_path_buf(),
        })
    }

    /// Starts a write transaction holding the write lock from its first statement.
    async fn write(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// Sends a hint to subscribers; having none is not an error.
    fn publish(&self, wakeup: Wakeup) {
        let _ = self.wakeups.send(wakeup);
    }

    /// Sends each hint a write implies (see `crate::store::rules`), in order.
    fn publish_all(&self, wakeups: Vec<Wakeup>) {
        for wakeup in wakeups {
            self.publish(wakeup);
        }
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        schema::migrator().run(&self.pool).await?;
        Ok(())
    }

    fn connections_in_use(&self) -> Option<u32> {
        Some(super::pool_in_use(&self.pool))
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn create_task_by(
        &self,
        new: NewTask,
        idempotency: Option<IdempotencyClaim>,
        by: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Created, StoreError> {
        self.create_task_tx(new, idempotency, by, now).await
    }

    async fn get_task(&self, tenant_id: &str, id: TaskId) -> Result<Option<Task>, StoreError> {
        self.get_task_row(tenant_id, id).await
    }

    async fn get_checkpoint(
        &self,
        tenant_id: &str,
        id: TaskId,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        self.checkpoint_row(tenant_id, id).await
    }

    async fn list_tasks(
        &self,
        tenant_id: &str,
        query: &TaskQuery,
    ) -> Result<Vec<Task>, StoreError> {
        self.list_task_rows(tenant_id, query).await
    }

    async fn cancel_task_by(
        &self,
        tenant_id: &str,
        id: TaskId,
        by: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<CancelOutcome, StoreError> {
        self.cancel_task_tx(tenant_id, id, by, now).await
    }

    async fn post_message(
        &self,
        post: super::PostMessage<'_>,
    ) -> Result<super::PostOutcome, StoreError> {
        self.post_message_tx(post).await
    }

    async fn park(
        &self,
        lease: &Lease,
        park: super::approvals::Park,
        now: DateTime<Utc>,
    ) -> Result<super::approvals::Parked, StoreError> {
        self.park_tx(lease, park, now).await
    }

    async fn list_approvals(
        &self,
        tenant_id: &str,
        task_id: TaskId,
    ) -> Result<Vec<crate::domain::approval::Approval>, StoreError> {
        self.list_approval_rows(tenant_id, task_id).await
    }

    async fn decide_approval(
        &self,
        decide: super::approvals::Decide<'_>,
    ) -> Result<super::approvals::DecideOutcome, StoreError> {
        self.decide_tx(decide).await
    }

    async fn expire_approvals(&self, now: DateTime<Utc>) -> Result<Vec<TaskId>, StoreError> {
        self.expire_tx(now).await
    }

    async fn list_messages(
        &self,
        tenant_id: &str,
        task_id: TaskId,
        after: u32,
    ) -> Result<Vec<crate::domain::message::TaskMessage>, StoreError> {
        self.list_message_rows(tenant_id, task_id, after).await
    }

    async fn list_events(
        &self,
        tenant_id: &str,
        task_id: TaskId,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<Event>, StoreError> {
        self.list_event_rows(tenant_id, task_id, after_seq, limit)
            .await
    }

    async fn list_plan_versions(
        &self,
        tenant_id: &str,
        task_id: TaskId,
    ) -> Result<Vec<PlanVersionRecord>, StoreError> {
        self.list_plan_version_rows(tenant_id, task_id).await
    }

    async fn get_plan_version(
        &self,
        tenant_id: &str,
        task_id: TaskId,
        version: i32,
    ) -> Result<Option<PlanVersionRecord>, StoreError> {
        self.get_plan_version_row(tenant_id, task_id, version).await
    }

    async fn list_ledger_entries(
        &self,
        tenant_id: &str,
        task_id: TaskId,
    ) -> Result<Vec<LedgerEntry>, StoreError> {
        self.list_ledger_rows(tenant_id, task_id).await
    }

    async fn spend(
        &self,
        tenant_id: Option<&str>,
        since: DateTime<Utc>,
    ) -> Result<Vec<SpendHour>, StoreError> {
        self.spend_rows(tenant_id, since).await
    }

    async fn spend_waits(
        &self,
        tenant_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, DateTime<Utc>)>, StoreError> {
        self.spend_wait_rows(tenant_id, now).await
    }

    async fn list_artifacts(
        &self,
        tenant_id: &str,
        task_id: TaskId,
    ) -> Result<Vec<Artifact>, StoreError> {
        self.list_artifact_rows(tenant_id, task_id).await
    }

    async fn claim(&self, params: ClaimParams<'_>) -> Result<Option<Claimed>, StoreError> {
        self.claim_tx(params).await
    }

    async fn heartbeat(
        &self,
        lease: &Lease,
        now: DateTime<Utc>,
        lease_ttl: Duration,
    ) -> Result<LeaseStatus, StoreError> {
        self.heartbeat_row(lease, now, lease_ttl).await
    }

    async fn commit(
        &self,
        lease: &Lease,
        change: Change,
        now: DateTime<Utc>,
    ) -> Result<Commit, StoreError> {
        self.commit_tx(lease, change, now).await
    }

    async fn reap_expired(&self, now: DateTime<Utc>) -> Result<Vec<TaskId>, StoreError> {
        self.reap_expired_tx(now, None).await
    }

    async fn lock_node(&self, node: &str) -> Result<Option<NodeLock>, StoreError> {
        self.lock_node_file(node)
    }

    async fn reclaim_node(
        &self,
        prefix: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<TaskId>, StoreError> {
        self.reap_expired_tx(now, Some(prefix)).await
    }

    async fn get_receipt(
        &self,
        task_id: TaskId,
        idempotency_key: &str,
    ) -> Result<Option<ToolReceipt>, StoreError> {
        self.get_receipt_row(task_id, idempotency_key).await
    }

    async fn put_receipt(
        &self,
        receipt: NewToolReceipt,
        now: DateTime<Utc>,
    ) -> Result<ToolReceipt, StoreError> {
        self.put_receipt_tx(receipt, now).await
    }

    async fn delete_receipt(
        &self,
        task_id: TaskId,
        idempotency_key: &str,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        sqlx::query("DELETE FROM tool_receipts WHERE idempotency_key = ?1 AND task_id = ?2")
            .bind(idempotency_key)
            .bind(rows::id_text(task_id))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn create_api_key(
        &self,
        new: NewApiKey,
        now: DateTime<Utc>,
    ) -> Result<ApiKey, StoreError> {
        self.insert_api_key(new, now).await
    }

    async fn get_api_key(&self, id: &str) -> Result<Option<StoredApiKey>, StoreError> {
        self.api_key_row(id).await
    }

    async fn list_api_keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        self.api_key_rows().await
    }

    async fn revoke_api_key(
        &self,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<ApiKey>, StoreError> {
        self.revoke_api_key_tx(id, now).await
    }

    async fn has_api_keys(&self) -> Result<bool, StoreError> {
        self.any_api_key().await
    }

    async fn create_stream_token(
        &self,
        token: NewStreamToken,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.insert_stream_token(token, now).await
    }

    async fn get_stream_token(&self, token_hash: &str) -> Result<Option<StreamToken>, StoreError> {
        self.stream_token_row(token_hash).await
    }

    fn subscribe(&self) -> broadcast::Receiver<Wakeup> {
        self.wakeups.subscribe()
    }
}
