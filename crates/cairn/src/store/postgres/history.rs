//! Reads of the append-only tables (events, plan versions, ledger, artifacts) and the tool
//! receipts, whose first write wins.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::rows;
use crate::domain::event::Event;
use crate::domain::task::TaskId;
use crate::store::rules;
use crate::store::{
    Artifact, LedgerEntry, NewToolReceipt, PlanVersionRecord, StoreError, ToolReceipt,
};

/// The tenant condition of a read of an append-only table: the task `$1` belongs to the tenant
/// bound at `$N` (a primary-key lookup of the task row), so another tenant's id reads nothing.
macro_rules! owned_by {
    ($n:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM tasks WHERE tasks.id = $1 AND tasks.tenant_id = $",
            $n,
            ")"
        )
    };
}

pub(super) async fn events(
    pool: &PgPool,
    tenant_id: &str,
    task_id: TaskId,
    after_seq: i64,
    limit: i64,
) -> Result<Vec<Event>, StoreError> {
    let Some(limit) = rules::page_limit(limit) else {
        return Ok(Vec::new());
    };
    sqlx::query(concat!(
        "SELECT task_id, seq, kind, data, created_at FROM events \
         WHERE task_id = $1 AND seq > $2 AND ",
        owned_by!(4),
        " \
         ORDER BY seq LIMIT $3"
    ))
    .bind(task_id)
    .bind(after_seq)
    .bind(limit)
    .bind(tenant_id)
    .fetch_all(pool)
    .await?
    .iter()
    .map(rows::event)
    .collect()
}

pub(super) async fn plan_versions(
    pool: &PgPool,
    tenant_id: &str,
    task_id: TaskId,
) -> Result<Vec<PlanVersionRecord>, StoreError> {
    sqlx::query(concat!(
        "SELECT task_id, version, reason, caused_by_seq, plan, created_at FROM plan_versions \
         WHERE task_id = $1 AND ",
        owned_by!(2),
        " \
         ORDER BY version"
    ))
    .bind(task_id)
    .bind(tenant_id)
    .fetch_all(pool)
    .await?
    .iter()
    .map(rows::plan_version)
    .collect()
}

pub(super) async fn plan_version(
    pool: &PgPool,
    tenant_id: &str,
    task_id: TaskId,
    version: i32,
) -> Result<Option<PlanVersionRecord>, StoreError> {
    sqlx::query(concat!(
        "SELECT task_id, version, reason, caused_by_seq, plan, created_at FROM plan_versions \
         WHERE task_id = $1 AND version = $2 AND ",
        owned_by!(3)
    ))
    .bind(task_id)
    .bind(version)
    .bind(tenant_id)
    .fetch_optional(pool)
    .await?
    .as_ref()
    .map(rows::plan_version)
    .transpose()
}

pub(super) async fn ledger_entries(
    pool: &PgPool,
    tenant_id: &str,
    task_id: TaskId,
) -> Result<Vec<LedgerEntry>, StoreError> {
    sqlx::query(concat!(
        "SELECT id, task_id, milestone_id, kind, unit, amount, created_at FROM ledger_entries \
         WHERE task_id = $1 AND ",
        owned_by!(2),
        " ORDER BY id"
    ))
    .bind(task_id)
    .bind(tenant_id)
    .fetch_all(pool)
    .await?
    .iter()
    .map(rows::ledger_entry)
    .collect()
}

pub(super) async fn artifacts(
    pool: &PgPool,
    tenant_id: &str,
    task_id: TaskId,
) -> Result<Vec<Artifact>, StoreError> {
    sqlx::query(concat!(
        "SELECT task_id, milestone_id, name, value, created_at FROM artifacts \
         WHERE task_id = $1 AND ",
        owned_by!(2),
        " ORDER BY id"
    ))
    .bind(task_id)
    .bind(tenant_id)
    .fetch_all(pool)
    .await?
    .iter()
    .map(rows::artifact)
    .collect()
}

pub(super) async fn receipt(
    pool: &PgPool,
    task_id: TaskId,
    idempotency_key: &str,
) -> Result<Option<ToolReceipt>, StoreError> {
    sqlx::query(
        "SELECT idempotency_key, task_id, tool, response, created_at FROM tool_receipts \
         WHERE idempotency_key = $1 AND task_id = $2",
    )
    .bind(idempotency_key)
    .bind(task_id)
    .fetch_optional(pool)
    .await?
    .as_ref()
    .map(rows::receipt)
    .transpose()
}

/// Inserts unless the key exists, then returns whatever is stored. Two statements on purpose:
/// a row committed by a concurrent writer is invisible to the snapshot of the INSERT that
/// conflicted with it, but visible to the next statement.
pub(super) async fn put_receipt(
    pool: &PgPool,
    receipt: NewToolReceipt,
    now: DateTime<Utc>,
) -> Result<ToolReceipt, StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO tool_receipts (idempotency_key, task_id, tool, response, created_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (idempotency_key) DO NOTHING \
         RETURNING idempotency_key, task_id, tool, response, created_at",
    )
    .bind(&receipt.idempotency_key)
    .bind(receipt.task_id)
    .bind(&receipt.tool)
    .bind(&receipt.response)
    .bind(now)
    .fetch_optional(pool)
    .await?;
    if let Some(row) = inserted {
        return rows::receipt(&row);
    }
    self::receipt(pool, receipt.task_id, &receipt.idempotency_key)
        .await?
        .ok_or_else(|| {
            StoreError::Corrupt(format!(
                "receipt {:?} conflicted but is not stored",
                receipt.idempotency_key
            ))
        })
}
