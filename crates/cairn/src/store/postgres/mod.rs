//! The Postgres store: production storage, and how cairn scales out.
//!
//! Many `cairn serve` replicas share one database. They never run one task at once because
//! claiming is a single `FOR UPDATE SKIP LOCKED` statement that bumps the task's fence, and
//! every worker write is checked against that fence ([`lease`], [`commit`]). With a per-tenant
//! cap, a claim also takes its tenant's advisory lock and recounts, so replicas together never
//! run more of a tenant's tasks than the cap. They learn about
//! each other's writes through `NOTIFY`, sent after commit ([`outbox`]) while another replica
//! listens and heard by a `LISTEN`ing connection ([`notify`]), as hints only; a store's own
//! subscribers get its hints in process, at commit.
//!
//! Layout, mirroring `sqlite/` file for file: [`schema`] embeds the migrations, [`tasks`]
//! serves the API's task rows (create with idempotency, get, list, cancel), [`lease`] claims,
//! heartbeats and reaps, [`commit`] applies fenced changes (a batch of them per statement, gathered
//! by [`group`]), [`history`] reads the append-only
//! tables and receipts, [`rows`] maps rows to domain types. The rules both backends share (what a
//! commit implies for the task's status, what cancel may do, idempotency replay, page bounds,
//! which hints follow a write) live in `crate::store::rules`. Every statement is a static string
//! with bound parameters; every time comes from the caller.
//!
//! Postgres-only: [`group`] (SQLite writes through one connection and keeps one transaction per
//! change: group commit would buy it nothing), [`notify`] and [`outbox`]. Replicas are separate processes, so hints have to
//! travel through the database (`NOTIFY` after commit, a `LISTEN`ing connection); SQLite is
//! single-node and its hints stay in an in-process channel, so it has no counterpart.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use sqlx::PgPool;
use tokio::sync::broadcast;

use super::*;
use crate::domain::event::Event;
use crate::domain::task::{Lease, NewTask, Task, TaskId};
use crate::store::keys::{ApiKey, NewApiKey, NewStreamToken, StoredApiKey, StreamToken};
pub use connect::PoolOptions;
pub use group::{DEFAULT_COMMIT_WRITERS, GroupStats};
pub use outbox::HintStats;

mod approvals;
mod commit;
mod connect;
mod group;
mod history;
mod keys;
mod lease;
mod messages;
mod notify;
mod outbox;
mod rows;
mod schema;
mod spend;
mod tasks;

/// How many hints a slow subscriber may fall behind before it sees `Lagged` (and re-reads).
const WAKEUP_CAPACITY: usize = 1024;
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    wakeups: broadcast::Sender<Wakeup>,
    hints: Arc<outbox::Outbox>,
    /// The group commit's writers ([`group`]), shared by clones.
    group: Arc<group::GroupCommit<commit::Commits>>,
    /// The writer that batches task creations without an idempotency key ([`tasks`]).
    creations: Arc<group::GroupCommit<tasks::Creations>>,
    /// Shared by clones; the listener and the hint sender stop when the last clone is dropped.
    _background: Arc<(notify::ListenerTask, outbox::SenderTask)>,
}

impl PgStore {
    /// What the hint sender did so far ([`outbox`]).
    pub fn hint_stats(&self) -> HintStats {
        self.hints.stats()
    }

    /// How the group commit batched the fenced writes so far ([`group`]).
    pub fn group_stats(&self) -> GroupStats {
        self.group.stats()
    }

    /// How the task creations without an idempotency key were batched so far ([`group`]).
    pub fn creation_stats(&self) -> GroupStats {
        self.creations.stats()
    }
}

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> Backend {
        Backend::Postgres
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
        let creation = tasks::Creation {
            new,
            by: by.map(str::to_string),
            now,
        };
        match idempotency {
            None => tasks::create(&self.creations, &self.hints, creation).await,
            Some(claim) => tasks::create_claimed(&self.pool, &self.hints, creation, claim).await,
        }
    }

    async fn get_task(&self, tenant_id: &str, id: TaskId) -> Result<Option<Task>, StoreError> {
        tasks::get(&self.pool, tenant_id, id).await
    }

    async fn get_checkpoint(
        &self,
        tenant_id: &str,
        id: TaskId,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        tasks::checkpoint(&self.pool, tenant_id, id).await
    }

    async fn list_tasks(
        &self,
        tenant_id: &str,
        query: &TaskQuery,
    ) -> Result<Vec<Task>, StoreError> {
        tasks::list(&self.pool, tenant_id, query).await
    }

    async fn cancel_task_by(
        &self,
        tenant_id: &str,
        id: TaskId,
        by: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<CancelOutcome, StoreError> {
        tasks::cancel(&self.pool, &self.hints, tenant_id, id, by, now).await
    }

    async fn post_message(&self, post: PostMessage<'_>) -> Result<PostOutcome, StoreError> {
        messages::post(&self.pool, &self.hints, post).await
    }

    async fn park(
        &self,
        lease: &Lease,
        park: crate::store::approvals::Park,
        now: DateTime<Utc>,
    ) -> Result<crate::store::approvals::Parked, StoreError> {
        approvals::park(&self.pool, &self.hints, lease, park, now).await
    }

    async fn list_approvals(
        &self,
        tenant_id: &str,
        task_id: TaskId,
    ) -> Result<Vec<crate::domain::approval::Approval>, StoreError> {
        approvals::list(&self.pool, tenant_id, task_id).await
    }

    async fn decide_approval(
        &self,
        decide: crate::store::approvals::Decide<'_>,
    ) -> Result<crate::store::approvals::DecideOutcome, StoreError> {
        approvals::decide(&self.pool, &self.hints, decide).await
    }

    async fn expire_approvals(&self, now: DateTime<Utc>) -> Result<Vec<TaskId>, StoreError> {
        approvals::expire(&self.pool, &self.hints, now).await
    }

    async fn list_messages(
        &self,
        tenant_id: &str,
        task_id: TaskId,
        after: u32,
    ) -> Result<Vec<crate::domain::message::TaskMessage>, StoreError> {
        messages::list(&self.pool, tenant_id, task_id, after).await
    }

    async fn list_events(
        &self,
        tenant_id: &str,
        task_id: TaskId,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<Event>, StoreError> {
        history::events(&self.pool, tenant_id, task_id, after_seq, limit).await
    }

    async fn list_plan_versions(
        &self,
        tenant_id: &str,
        task_id: TaskId,
    ) -> Result<Vec<PlanVersionRecord>, StoreError> {
        history::plan_versions(&self.pool, tenant_id, task_id).await
    }

    async fn get_plan_version(
        &self,
        tenant_id: &str,
        task_id: TaskId,
        version: i32,
    ) -> Result<Option<PlanVersionRecord>, StoreError> {
        history::plan_version(&self.pool, tenant_id, task_id, version).await
    }

    async fn list_ledger_entries(
        &self,
        tenant_id: &str,
        task_id: TaskId,
    ) -> Result<Vec<LedgerEntry>, StoreError> {
        history::ledger_entries(&self.pool, tenant_id, task_id).await
    }

    async fn spend(
        &self,
        tenant_id: Option<&str>,
        since: DateTime<Utc>,
    ) -> Result<Vec<SpendHour>, StoreError> {
        spend::spend(&self.pool, tenant_id, since).await
    }

    async fn spend_waits(
        &self,
        tenant_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<(String, DateTime<Utc>)>, StoreError> {
        spend::spend_waits(&self.pool, tenant_id, now).await
    }

    async fn list_artifacts(
        &self,
        tenant_id: &str,
        task_id: TaskId,
    ) -> Result<Vec<Artifact>, StoreError> {
        history::artifacts(&self.pool, tenant_id, task_id).await
    }

    async fn claim(&self, params: ClaimParams<'_>) -> Result<Option<Claimed>, StoreError> {
        lease::claim(&self.pool, &self.hints, params).await
    }

    async fn heartbeat(
        &self,
        lease: &Lease,
        now: DateTime<Utc>,
        lease_ttl: Duration,
    ) -> Result<LeaseStatus, StoreError> {
        lease::heartbeat(&self.pool, lease, now, lease_ttl).await
    }

    async fn commit(
        &self,
        lease: &Lease,
        change: Change,
        now: DateTime<Utc>,
    ) -> Result<Commit, StoreError> {
        let member = commit::Member {
            lease: lease.clone(),
            change,
            now,
        };
        self.group.submit(member).await
    }

    async fn reap_expired(&self, now: DateTime<Utc>) -> Result<Vec<TaskId>, StoreError> {
        lease::reap_expired(&self.pool, &self.hints, now).await
    }

    async fn lock_node(&self, node: &str) -> Result<Option<NodeLock>, StoreError> {
        let held = lease::lock_node(&self.pool, node).await?;
        Ok(held.map(|conn| NodeLock::new(Box::new(conn))))
    }

    async fn reclaim_node(
        &self,
        prefix: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<TaskId>, StoreError> {
        lease::reclaim(&self.pool, &self.hints, prefix, now).await
    }

    async fn get_receipt(
        &self,
        task_id: TaskId,
        idempotency_key: &str,
    ) -> Result<Option<ToolReceipt>, StoreError> {
        history::receipt(&self.pool, task_id, idempotency_key).await
    }

    async fn put_receipt(
        &self,
        receipt: NewToolReceipt,
        now: DateTime<Utc>,
    ) -> Result<ToolReceipt, StoreError> {
        history::put_receipt(&self.pool, receipt, now).await
    }

    async fn delete_receipt(
        &self,
        task_id: TaskId,
        idempotency_key: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM tool_receipts WHERE idempotency_key = $1 AND task_id = $2")
            .bind(idempotency_key)
            .bind(task_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn create_api_key(
        &self,
        new: NewApiKey,
        now: DateTime<Utc>,
    ) -> Result<ApiKey, StoreError> {
        keys::insert(&self.pool, new, now).await
    }

    async fn get_api_key(&self, id: &str) -> Result<Option<StoredApiKey>, StoreError> {
        keys::get(&self.pool, id).await
    }

    async fn list_api_keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        keys::list(&self.pool).await
    }

    async fn revoke_api_key(
        &self,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<ApiKey>, StoreError> {
        keys::revoke(&self.pool, id, now).await
    }

    async fn has_api_keys(&self) -> Result<bool, StoreError> {
        keys::any(&self.pool).await
    }

    async fn create_stream_token(
        &self,
        token: NewStreamToken,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        keys::insert_stream_token(&self.pool, token, now).await
    }

    async fn get_stream_token(&self, token_hash: &str) -> Result<Option<StreamToken>, StoreError> {
        keys::stream_token(&self.pool, token_hash).await
    }

    fn subscribe(&self) -> broadcast::Receiver<Wakeup> {
        self.wakeups.subscribe()
    }
}
