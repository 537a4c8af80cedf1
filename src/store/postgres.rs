//! Stub: replaced by the real postgres store.
#![allow(unused_variables)]

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use tokio::sync::broadcast;

use super::*;
use crate::domain::event::Event;
use crate::domain::task::{Lease, NewTask, Task, TaskId};

#[derive(Debug, Clone)]
pub struct PgStore {}

impl PgStore {
    /// Connects (and does not migrate) a pool to `url`.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        let _ = (url, max_connections);
        todo!("stub")
    }
}

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> Backend {
        todo!("stub")
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        todo!("stub")
    }

    async fn ping(&self) -> Result<(), StoreError> {
        todo!("stub")
    }

    async fn create_task(
        &self,
        new: NewTask,
        idempotency: Option<IdempotencyClaim>,
        now: DateTime<Utc>,
    ) -> Result<Created, StoreError> {
        todo!("stub")
    }

    async fn get_task(&self, tenant_id: &str, id: TaskId) -> Result<Option<Task>, StoreError> {
        todo!("stub")
    }

    async fn list_tasks(
        &self,
        tenant_id: &str,
        query: &TaskQuery,
    ) -> Result<Vec<Task>, StoreError> {
        todo!("stub")
    }

    async fn cancel_task(
        &self,
        tenant_id: &str,
        id: TaskId,
        now: DateTime<Utc>,
    ) -> Result<CancelOutcome, StoreError> {
        todo!("stub")
    }

    async fn list_events(
        &self,
        task_id: TaskId,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<Event>, StoreError> {
        todo!("stub")
    }

    async fn list_plan_versions(
        &self,
        task_id: TaskId,
    ) -> Result<Vec<PlanVersionRecord>, StoreError> {
        todo!("stub")
    }

    async fn get_plan_version(
        &self,
        task_id: TaskId,
        version: i32,
    ) -> Result<Option<PlanVersionRecord>, StoreError> {
        todo!("stub")
    }

    async fn list_ledger_entries(&self, task_id: TaskId) -> Result<Vec<LedgerEntry>, StoreError> {
        todo!("stub")
    }

    async fn list_artifacts(&self, task_id: TaskId) -> Result<Vec<Artifact>, StoreError> {
        todo!("stub")
    }

    async fn claim(
        &self,
        worker_id: &str,
        now: DateTime<Utc>,
        lease_ttl: Duration,
    ) -> Result<Option<Claimed>, StoreError> {
        todo!("stub")
    }

    async fn heartbeat(
        &self,
        lease: &Lease,
        now: DateTime<Utc>,
        lease_ttl: Duration,
    ) -> Result<LeaseStatus, StoreError> {
        todo!("stub")
    }

    async fn commit(
        &self,
        lease: &Lease,
        change: Change,
        now: DateTime<Utc>,
    ) -> Result<Commit, StoreError> {
        todo!("stub")
    }

    async fn reap_expired(&self, now: DateTime<Utc>) -> Result<Vec<TaskId>, StoreError> {
        todo!("stub")
    }

    async fn get_receipt(&self, idempotency_key: &str) -> Result<Option<ToolReceipt>, StoreError> {
        todo!("stub")
    }

    async fn put_receipt(
        &self,
        receipt: NewToolReceipt,
        now: DateTime<Utc>,
    ) -> Result<ToolReceipt, StoreError> {
        todo!("stub")
    }

    fn subscribe(&self) -> broadcast::Receiver<Wakeup> {
        todo!("stub")
    }
}
