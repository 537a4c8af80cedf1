//! Task life-cycle writes that do not need a lease: create (with client idempotency), cancel,
//! and the task reads the API serves.

use std::ops::ControlFlow;

use chrono::{DateTime, Utc};
use sqlx::{Row, SqliteConnection};

use super::SqliteStore;
use super::history::append_event;
use super::rows::{self, id_text, millis, task_columns, task_from_row};
use crate::domain::event::kinds;
use crate::domain::task::{NewTask, Task, TaskId};
use crate::store::rules;
use crate::store::{CancelOutcome, Created, IdempotencyClaim, StoreError, TaskQuery};

/// Reads a task by id alone (used where the caller already owns the id, e.g. a replayed key).
async fn task_by_id(conn: &mut SqliteConnection, id: &str) -> Result<Option<Task>, StoreError> {
    sqlx::query(concat!(
        "SELECT ",
        task_columns!(),
        " FROM tasks WHERE id = ?1"
    ))
    .bind(id)
    .fetch_optional(conn)
    .await?
    .as_ref()
    .map(task_from_row)
    .transpose()
}

/// An idempotency key already used by this tenant: the task it created (same request) or the
/// conflict (another request). `None` when the key is new.
async fn replay_key(
    conn: &mut SqliteConnection,
    tenant_id: &str,
    claim: &IdempotencyClaim,
) -> Result<Option<Result<Created, StoreError>>, StoreError> {
    let existing = sqlx::query(
        "SELECT request_hash, task_id FROM idempotency_keys \
         WHERE tenant_id = ?1 AND key = ?2",
    )
    .bind(tenant_id)
    .bind(&claim.key)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = existing else {
        return Ok(None);
    };
    let hash: String = row.try_get("request_hash")?;
    let task_id: String = row.try_get("task_id")?;
    let task = task_by_id(conn, &task_id).await?.ok_or_else(|| {
        StoreError::Corrupt(format!("idempotency key points at missing task {task_id}"))
    })?;
    if let Err(conflict) = rules::check_replay(&hash, claim, task.id) {
        return Ok(Some(Err(conflict)));
    }
    Ok(Some(Ok(rules::replayed(task))))
}

/// The new task's row, queued, with its first event's sequence number already counted.
async fn insert_task(
    conn: &mut SqliteConnection,
    id: &str,
    new: &NewTask,
    now_ms: i64,
) -> Result<Task, StoreError> {
    let row = sqlx::query(concat!(
        "INSERT INTO tasks (id, tenant_id, goal, strategy, budget_tokens, budget_tool_calls, \
         budget_wall_ms, metadata, status, created_at, updated_at, last_seq, tools, approval, \
         budget_cost) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'queued', ?9, ?9, 1, ?10, ?11, ?12) RETURNING ",
        task_columns!()
    ))
    .bind(id)
    .bind(&new.tenant_id)
    .bind(&new.goal)
    .bind(new.strategy.as_str())
    .bind(rows::budget_int("tokens", new.budget.tokens)?)
    .bind(rows::budget_int("tool_calls", new.budget.tool_calls)?)
    .bind(rows::budget_int("wall_ms", new.budget.wall_ms)?)
    .bind(rows::json_text(&new.metadata))
    .bind(now_ms)
    .bind(rules::tools_text(new.tools.as_deref()))
    .bind(new.approval.as_str())
    .bind(
        new.budget
            .cost
            .map(|cost| rows::budget_int("cost", cost))
            .transpose()?,
    )
    .fetch_one(&mut *conn)
    .await?;
    task_from_row(&row)
}

impl SqliteStore {
    pub(super) async fn create_task_tx(
        &self,
        new: NewTask,
        idempotency: Option<IdempotencyClaim>,
        by: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Created, StoreError> {
        let now_ms = millis(now);
        let mut tx = self.write().await?;
        if let Some(claim) = &idempotency
            && let Some(replayed) = replay_key(&mut tx, &new.tenant_id, claim).await?
        {
            // Dropping `tx` rolls back: a replay or a conflict writes nothing.
            return replayed;
        }

        let id = id_text(new.id);
        let task = insert_task(&mut tx, &id, &new, now_ms).await?;
        let data = rules::created_event(&new, by);
        append_event(&mut tx, &id, 1, kinds::TASK_CREATED, &data, now_ms).await?;
        if let Some(claim) = &idempotency {
            sqlx::query(
                "INSERT INTO idempotency_keys (tenant_id, key, request_hash, task_id, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .bind(&new.tenant_id)
            .bind(&claim.key)
            .bind(&claim.request_hash)
            .bind(&id)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;

        self.publish_all(rules::created_wakeups(&task));
        Ok(rules::created(task))
    }

    pub(super) async fn get_task_row(
        &self,
        tenant_id: &str,
        id: TaskId,
    ) -> Result<Option<Task>, StoreError> {
        sqlx::query(concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks WHERE tenant_id = ?1 AND id = ?2"
        ))
        .bind(tenant_id)
        .bind(id_text(id))
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(task_from_row)
        .transpose()
    }

    pub(super) async fn checkpoint_row(
        &self,
        tenant_id: &str,
        id: TaskId,
    ) -> Result<Option<serde_json::Value>, StoreError> {
        let row = sqlx::query("SELECT state FROM tasks WHERE tenant_id = ?1 AND id = ?2")
            .bind(tenant_id)
            .bind(id_text(id))
            .fetch_optional(&self.pool)
            .await?;
        match row {
            Some(row) => rows::opt_json(&row, "state"),
            None => Ok(None),
        }
    }

    pub(super) async fn list_task_rows(
        &self,
        tenant_id: &str,
        query: &TaskQuery,
    ) -> Result<Vec<Task>, StoreError> {
        // One static statement per filter shape, so each is a range scan on its index (an
        // `?2 IS NULL OR ...` form would hide the keyset bound from SQLite's planner).
        // Binds: tenant, limit, then status and cursor when present, in that order.
        let sql = match (query.status.is_some(), query.before.is_some()) {
            (false, false) => concat!(
                "SELECT ",
                task_columns!(),
                " FROM tasks WHERE tenant_id = ?1 ORDER BY id DESC LIMIT ?2"
            ),
            (false, true) => concat!(
                "SELECT ",
                task_columns!(),
                " FROM tasks WHERE tenant_id = ?1 AND id < ?3 ORDER BY id DESC LIMIT ?2"
            ),
            (true, false) => concat!(
                "SELECT ",
                task_columns!(),
                " FROM tasks WHERE tenant_id = ?1 AND status = ?3 ORDER BY id DESC LIMIT ?2"
            ),
            (true, true) => concat!(
                "SELECT ",
                task_columns!(),
                " FROM tasks WHERE tenant_id = ?1 AND status = ?3 AND id < ?4 \
                 ORDER BY id DESC LIMIT ?2"
            ),
        };
        // A negative LIMIT means "no limit" to SQLite; the contract is "at most `limit`".
        let limit = rules::page_limit(query.limit).unwrap_or(0);
        let mut statement = sqlx::query(sql).bind(tenant_id).bind(limit);
        if let Some(status) = query.status {
            statement = statement.bind(status.as_str());
        }
        if let Some(before) = query.before {
            statement = statement.bind(id_text(before));
        }
        let rows = statement.fetch_all(&self.pool).await?;
        rows.iter().map(task_from_row).collect()
    }

    pub(super) async fn cancel_task_tx(
        &self,
        tenant_id: &str,
        id: TaskId,
        by: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<CancelOutcome, StoreError> {
        let now_ms = millis(now);
        let id_text = id_text(id);
        let mut tx = self.write().await?;
        let current = sqlx::query(concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks WHERE tenant_id = ?1 AND id = ?2"
        ))
        .bind(tenant_id)
        .bind(&id_text)
        .fetch_optional(&mut *tx)
        .await?;
        let current = match rules::cancellable(current.as_ref().map(task_from_row).transpose()?) {
            ControlFlow::Continue(current) => current,
            ControlFlow::Break(outcome) => return Ok(outcome),
        };
        // Bumping the fence and clearing the lease makes a running worker's next write LeaseLost.
        let row = sqlx::query(concat!(
            "UPDATE tasks SET status = 'cancelled', fence = fence + 1, claimed_by = NULL, \
             lease_expires_at = NULL, finished_at = ?2, updated_at = ?2, last_seq = last_seq + 1 \
             WHERE id = ?1 RETURNING ",
            task_columns!()
        ))
        .bind(&id_text)
        .bind(now_ms)
        .fetch_one(&mut *tx)
        .await?;
        let task = task_from_row(&row)?;
        let data = rules::cancelled_event(current.status, by);
        append_event(
            &mut tx,
            &id_text,
            task.last_seq,
            rules::CANCELLED_EVENT,
            &data,
            now_ms,
        )
        .await?;
        tx.commit().await?;

        self.publish_all(rules::cancelled_wakeups(&task));
        Ok(CancelOutcome::Cancelled(task))
    }
}
