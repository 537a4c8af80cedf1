//! Task rows as the API sees them: create (with idempotency), read, list, cancel.

use std::ops::ControlFlow;

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, PgPool, Row};

use super::outbox::Outbox;
use super::rows::{self, task_columns};
use crate::domain::event::kinds;
use crate::domain::task::{NewTask, Task, TaskId};
use crate::store::rules;
use crate::store::{CancelOutcome, Created, IdempotencyClaim, StoreError, TaskQuery};

/// Sorts above every UUID: the keyset cursor of a first page, so one statement (and one index
/// range scan) serves every page.
const MAX_UUID: uuid::Uuid = uuid::Uuid::max();

pub(super) async fn create(
    pool: &PgPool,
    hints: &Outbox,
    new: NewTask,
    idempotency: Option<IdempotencyClaim>,
    by: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Created, StoreError> {
    let Some(claim) = idempotency else {
        // One statement, its own transaction: the common path is one round trip.
        let task = insert_task(pool, &new, by, now).await?;
        hints.publish(rules::created_wakeups(&task));
        return Ok(rules::created(task));
    };
    let mut tx = pool.begin().await?;
    let task = insert_task(&mut *tx, &new, by, now).await?;
    // Inserted after the task so the foreign key holds. A concurrent transaction holding the
    // same key makes this statement wait for it; if that one commits, we fall through to DO
    // NOTHING, roll back our task and answer with theirs.
    let claimed = sqlx::query(
        "INSERT INTO idempotency_keys (tenant_id, key, request_hash, task_id, created_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant_id, key) DO NOTHING",
    )
    .bind(&new.tenant_id)
    .bind(&claim.key)
    .bind(&claim.request_hash)
    .bind(new.id)
    .bind(now)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !claimed {
        tx.rollback().await?;
        return replay(pool, &new.tenant_id, &claim).await;
    }
    tx.commit().await?;
    hints.publish(rules::created_wakeups(&task));
    Ok(rules::created(task))
}

/// Inserts the queued task and its `task.created` event (seq 1).
async fn insert_task<'c>(
    executor: impl PgExecutor<'c>,
    new: &NewTask,
    by: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Task, StoreError> {
    let row = sqlx::query(concat!(
        "WITH created AS ( \
            INSERT INTO tasks (id, tenant_id, goal, strategy, budget_tokens, budget_tool_calls, \
                budget_wall_ms, metadata, status, created_at, updated_at, last_seq) \
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'queued', $9, $9, 1) RETURNING * \
         ), logged AS ( \
            INSERT INTO events (task_id, seq, kind, data, created_at) \
            SELECT id, 1, $10, $11, $9 FROM created \
         ) \
         SELECT ",
        task_columns!(),
        " FROM created"
    ))
    .bind(new.id)
    .bind(&new.tenant_id)
    .bind(&new.goal)
    .bind(new.strategy.as_str())
    .bind(rows::bigint(new.budget.tokens, "budget.tokens")?)
    .bind(rows::bigint(new.budget.tool_calls, "budget.tool_calls")?)
    .bind(rows::bigint(new.budget.wall_ms, "budget.wall_ms")?)
    .bind(&new.metadata)
    .bind(now)
    .bind(kinds::TASK_CREATED)
    .bind(rules::created_event(new, by))
    .fetch_one(executor)
    .await?;
    rows::task(&row)
}

/// The key was taken by an earlier (now committed) request: same body -> its task, otherwise
/// a conflict.
async fn replay(
    pool: &PgPool,
    tenant_id: &str,
    claim: &IdempotencyClaim,
) -> Result<Created, StoreError> {
    let row = sqlx::query(
        "SELECT request_hash, task_id FROM idempotency_keys WHERE tenant_id = $1 AND key = $2",
    )
    .bind(tenant_id)
    .bind(&claim.key)
    .fetch_optional(pool)
    .await?
    .ok_or_else(|| {
        StoreError::Corrupt(format!(
            "idempotency key {:?} conflicted but is not stored",
            claim.key
        ))
    })?;
    let request_hash: String = row.try_get("request_hash")?;
    let task_id: TaskId = row.try_get("task_id")?;
    rules::check_replay(&request_hash, claim, task_id)?;
    let task = get(pool, tenant_id, task_id).await?.ok_or_else(|| {
        StoreError::Corrupt(format!("idempotency key points at missing task {task_id}"))
    })?;
    Ok(rules::replayed(task))
}

pub(super) async fn get(
    pool: &PgPool,
    tenant_id: &str,
    id: TaskId,
) -> Result<Option<Task>, StoreError> {
    let row = sqlx::query(concat!(
        "SELECT ",
        task_columns!(),
        " FROM tasks WHERE tenant_id = $1 AND id = $2"
    ))
    .bind(tenant_id)
    .bind(id)
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(rows::task).transpose()
}

pub(super) async fn list(
    pool: &PgPool,
    tenant_id: &str,
    query: &TaskQuery,
) -> Result<Vec<Task>, StoreError> {
    let Some(limit) = rules::page_limit(query.limit) else {
        return Ok(Vec::new());
    };
    let before = query.before.unwrap_or(MAX_UUID);
    let found = match query.status {
        None => {
            sqlx::query(concat!(
                "SELECT ",
                task_columns!(),
                " FROM tasks WHERE tenant_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3"
            ))
            .bind(tenant_id)
            .bind(before)
            .bind(limit)
            .fetch_all(pool)
            .await?
        }
        Some(status) => {
            sqlx::query(concat!(
                "SELECT ",
                task_columns!(),
                " FROM tasks WHERE tenant_id = $1 AND status = $4 AND id < $2 \
                 ORDER BY id DESC LIMIT $3"
            ))
            .bind(tenant_id)
            .bind(before)
            .bind(limit)
            .bind(status.as_str())
            .fetch_all(pool)
            .await?
        }
    };
    found.iter().map(rows::task).collect()
}

pub(super) async fn cancel(
    pool: &PgPool,
    hints: &Outbox,
    tenant_id: &str,
    id: TaskId,
    by: Option<&str>,
    now: DateTime<Utc>,
) -> Result<CancelOutcome, StoreError> {
    let mut tx = pool.begin().await?;
    let current = sqlx::query(concat!(
        "SELECT ",
        task_columns!(),
        " FROM tasks WHERE tenant_id = $1 AND id = $2 FOR UPDATE"
    ))
    .bind(tenant_id)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    let current = match rules::cancellable(current.as_ref().map(rows::task).transpose()?) {
        ControlFlow::Continue(current) => current,
        ControlFlow::Break(outcome) => return Ok(outcome),
    };
    // Bumping the fence (and clearing the lease) makes the running worker's next write
    // come back as LeaseLost.
    let row = sqlx::query(concat!(
        "UPDATE tasks SET status = 'cancelled', fence = fence + 1, claimed_by = NULL, \
         lease_expires_at = NULL, finished_at = $2, updated_at = $2, last_seq = last_seq + 1 \
         WHERE id = $1 RETURNING ",
        task_columns!()
    ))
    .bind(id)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    let task = rows::task(&row)?;
    sqlx::query(
        "INSERT INTO events (task_id, seq, kind, data, created_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(id)
    .bind(task.last_seq)
    .bind(rules::CANCELLED_EVENT)
    .bind(rules::cancelled_event(current.status, by))
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    hints.publish(rules::cancelled_wakeups(&task));
    Ok(CancelOutcome::Cancelled(task))
}
