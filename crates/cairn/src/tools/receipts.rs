//! Where receipts of side-effecting tool calls are kept.
//!
//! Production keeps them in the [`Store`] (`tool_receipts`, one row per idempotency key, first
//! write wins). The small [`ReceiptStore`] trait lets the tool client be used, and tested,
//! without a database: [`MemoryReceipts`] is the in-process version.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::domain::task::TaskId;
use crate::store::{NewToolReceipt, RETRY_BUDGET, Store, StoreError, ToolReceipt, retry_transient};

#[async_trait]
pub trait ReceiptStore: Send + Sync {
    /// The receipt of `task_id`'s call with this key; another task's is never returned.
    async fn get(
        &self,
        task_id: TaskId,
        idempotency_key: &str,
    ) -> Result<Option<ToolReceipt>, StoreError>;
    /// Stores a receipt unless one exists for the key; returns the one kept.
    async fn put(
        &self,
        receipt: NewToolReceipt,
        now: DateTime<Utc>,
    ) -> Result<ToolReceipt, StoreError>;
    /// Removes `task_id`'s receipt under this key, if any.
    async fn forget(&self, task_id: TaskId, idempotency_key: &str) -> Result<(), StoreError>;
}

/// Receipts in cairn's store. A passing store fault (a reset connection, a restart) is retried
/// for a few seconds: a read repeats harmlessly and a put is first-write-wins, so a put whose
/// answer was lost and is sent again keeps the first receipt.
#[derive(Clone)]
pub struct StoreReceipts(pub Arc<dyn Store>);

#[async_trait]
impl ReceiptStore for StoreReceipts {
    async fn get(
        &self,
        task_id: TaskId,
        idempotency_key: &str,
    ) -> Result<Option<ToolReceipt>, StoreError> {
        retry_transient(RETRY_BUDGET, || {
            self.0.get_receipt(task_id, idempotency_key)
        })
        .await
    }
    async fn put(
        &self,
        receipt: NewToolReceipt,
        now: DateTime<Utc>,
    ) -> Result<ToolReceipt, StoreError> {
        retry_transient(RETRY_BUDGET, || self.0.put_receipt(receipt.clone(), now)).await
    }
    async fn forget(&self, task_id: TaskId, idempotency_key: &str) -> Result<(), StoreError> {
        retry_transient(RETRY_BUDGET, || {
            self.0.delete_receipt(task_id, idempotency_key)
        })
        .await
    }
}

/// Receipts in memory: for tests and the simulator-only demo.
#[derive(Debug, Default)]
pub struct MemoryReceipts {
    by_key: Mutex<HashMap<String, ToolReceipt>>,
}

impl MemoryReceipts {
    pub fn len(&self) -> usize {
        self.lock().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, ToolReceipt>> {
        self.by_key
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl ReceiptStore for MemoryReceipts {
    async fn get(
        &self,
        task_id: TaskId,
        idempotency_key: &str,
    ) -> Result<Option<ToolReceipt>, StoreError> {
        Ok(self
            .lock()
            .get(idempotency_key)
            .filter(|r| r.task_id == task_id)
            .cloned())
    }
    async fn put(
        &self,
        receipt: NewToolReceipt,
        now: DateTime<Utc>,
    ) -> Result<ToolReceipt, StoreError> {
        let mut map = self.lock();
        let kept = map
            .entry(receipt.idempotency_key.clone())
            .or_insert_with(|| ToolReceipt {
                idempotency_key: receipt.idempotency_key,
                task_id: receipt.task_id,
                tool: receipt.tool,
                response: receipt.response,
                created_at: now,
            });
        Ok(kept.clone())
    }
    async fn forget(&self, task_id: TaskId, idempotency_key: &str) -> Result<(), StoreError> {
        let mut map = self.lock();
        if map
            .get(idempotency_key)
            .is_some_and(|r| r.task_id == task_id)
        {
            map.remove(idempotency_key);
        }
        Ok(())
    }
}
