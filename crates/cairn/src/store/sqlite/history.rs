//! The append-only tables: the one helper every writer uses to append an event, the reads of
//! events, plan versions, ledger entries and artifacts, and the tool receipts, which are
//! write-once: the first receipt for a key wins.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::SqliteConnection;

use super::SqliteStore;
use super::rows::{self, id_text, millis};
use crate::domain::event::Event;
use crate::domain::task::TaskId;
use crate::store::rules;
use crate::store::{
    Artifact, LedgerEntry, NewToolReceipt, PlanVersionRecord, StoreError, ToolReceipt,
};

/// The tenant condition of a read of an append-only table: the task `?1` belongs to the tenant
/// bound at `?N` (a primary-key lookup of the task row).
macro_rules! owned_by {
    ($n:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM tasks WHERE tasks.id = ?1 AND tasks.tenant_id = ?",
            $n,
            ")"
        )
    };
}

/// Appends one event row. The caller has already advanced `tasks.last_seq` to `seq` in the same
/// transaction, which is what keeps per-task seqs dense and ordered.
pub(super) async fn append_event(
    conn: &mut SqliteConnection,
    task_id: &str,
    seq: i64,
    kind: &str,
    data: &Value,
    now_ms: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO events (task_id, seq, kind, data, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .bind(task_id)
    .bind(seq)
    .bind(kind)
    .bind(rows::json_text(data))
    .bind(now_ms)
    .execute(conn)
    .await?;
    Ok(())
}

impl SqliteStore {
    pub(super) async fn list_event_rows(
        &self,
        tenant_id: &str,
        task_id: TaskId,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<Event>, StoreError> {
        // A negative LIMIT means "no limit" to SQLite; the contract is "at most `limit`".
        let rows = sqlx::query(concat!(
            "SELECT task_id, seq, kind, data, created_at FROM events \
             WHERE task_id = ?1 AND seq > ?2 AND ",
            owned_by!(4),
            " ORDER BY seq LIMIT ?3"
        ))
        .bind(id_text(task_id))
        .bind(after_seq)
        .bind(rules::page_limit(limit).unwrap_or(0))
        .bind(tenant_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(rows::event_from_row).collect()
    }

    pub(super) async fn list_plan_version_rows(
        &self,
        tenant_id: &str,
        task_id: TaskId,
    ) -> Result<Vec<PlanVersionRecord>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT task_id, version, reason, caused_by_seq, plan, created_at \
             FROM plan_versions WHERE task_id = ?1 AND ",
            owned_by!(2),
            " ORDER BY version"
        ))
        .bind(id_text(task_id))
        .bind(tenant_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(rows::plan_version_from_row).collect()
    }

    pub(super) async fn get_plan_version_row(
        &self,
        tenant_id: &str,
        task_id: TaskId,
        version: i32,
    ) -> Result<Option<PlanVersionRecord>, StoreError> {
        sqlx::query(concat!(
            "SELECT task_id, version, reason, caused_by_seq, plan, created_at \
             FROM plan_versions WHERE task_id = ?1 AND version = ?2 AND ",
            owned_by!(3)
        ))
        .bind(id_text(task_id))
        .bind(version)
        .bind(tenant_id)
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(rows::plan_version_from_row)
        .transpose()
    }

    pub(super) async fn list_ledger_rows(
        &self,
        tenant_id: &str,
        task_id: TaskId,
    ) -> Result<Vec<LedgerEntry>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT id, task_id, milestone_id, kind, unit, amount, created_at \
             FROM ledger_entries WHERE task_id = ?1 AND ",
            owned_by!(2),
            " ORDER BY id"
        ))
        .bind(id_text(task_id))
        .bind(tenant_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(rows::ledger_entry_from_row).collect()
    }

    pub(super) async fn list_artifact_rows(
        &self,
        tenant_id: &str,
        task_id: TaskId,
    ) -> Result<Vec<Artifact>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT task_id, milestone_id, name, value, created_at \
             FROM artifacts WHERE task_id = ?1 AND ",
            owned_by!(2),
            " ORDER BY id"
        ))
        .bind(id_text(task_id))
        .bind(tenant_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(rows::artifact_from_row).collect()
    }

    pub(super) async fn get_receipt_row(
        &self,
        task_id: TaskId,
        idempotency_key: &str,
    ) -> Result<Option<ToolReceipt>, StoreError> {
        sqlx::query(
            "SELECT idempotency_key, task_id, tool, response, created_at \
             FROM tool_receipts WHERE idempotency_key = ?1 AND task_id = ?2",
        )
        .bind(idempotency_key)
        .bind(id_text(task_id))
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(rows::receipt_from_row)
        .transpose()
    }

    pub(super) async fn put_receipt_tx(
        &self,
        receipt: NewToolReceipt,
        now: DateTime<Utc>,
    ) -> Result<ToolReceipt, StoreError> {
        let mut tx = self.write().await?;
        // A tool call that was performed twice (a resumed step racing its predecessor) must not
        // overwrite the result the first caller already acted on.
        sqlx::query(
            "INSERT INTO tool_receipts (idempotency_key, task_id, tool, response, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (idempotency_key) DO NOTHING",
        )
        .bind(&receipt.idempotency_key)
        .bind(id_text(receipt.task_id))
        .bind(&receipt.tool)
        .bind(rows::json_text(&receipt.response))
        .bind(millis(now))
        .execute(&mut *tx)
        .await?;
        let row = sqlx::query(
            "SELECT idempotency_key, task_id, tool, response, created_at \
             FROM tool_receipts WHERE idempotency_key = ?1",
        )
        .bind(&receipt.idempotency_key)
        .fetch_one(&mut *tx)
        .await?;
        let stored = rows::receipt_from_row(&row)?;
        tx.commit().await?;
        if stored.task_id != receipt.task_id {
            return Err(StoreError::Corrupt(format!(
                "receipt {:?} belongs to another task",
                receipt.idempotency_key
            )));
        }
        Ok(stored)
    }
}
