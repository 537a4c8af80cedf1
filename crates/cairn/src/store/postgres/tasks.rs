//! Task rows as the API sees them: create (with idempotency), read, list, cancel.

use std::collections::HashMap;
use std::ops::ControlFlow;

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgConnection, PgPool, Row};

use super::group::{Batch, GroupCommit, single};
use super::outbox::Outbox;
use super::rows::{self, task_columns};
use crate::domain::event::kinds;
use crate::domain::task::{NewTask, Task, TaskId};
use crate::store::rules;
use crate::store::{CancelOutcome, Created, IdempotencyClaim, StoreError, TaskQuery};

/// Sorts above every UUID: the keyset cursor of a first page, so one statement (and one index
/// range scan) serves every page.
const MAX_UUID: uuid::Uuid = uuid::Uuid::max();

/// A task to create: what the API asked for, who asked, and when.
#[derive(Debug)]
pub(super) struct Creation {
    pub(super) new: NewTask,
    pub(super) by: Option<String>,
    pub(super) now: DateTime<Utc>,
}

/// Creations without an idempotency key, as a kind of group-committed batch ([`super::group`]):
/// the tasks posted at once are inserted by one statement, one transaction, one WAL flush.
#[derive(Debug)]
pub(super) struct Creations;

impl Batch for Creations {
    type Member = Creation;
    type Outcome = Task;

    fn key(member: &Creation) -> TaskId {
        member.new.id
    }

    async fn apply(
        conn: &mut PgConnection,
        _hints: &Outbox,
        members: &[Creation],
    ) -> Result<Vec<Task>, StoreError> {
        insert_tasks(conn, members).await
    }
}

/// Creates a task without an idempotency key: batched with the others posted at once.
pub(super) async fn create(
    creations: &GroupCommit<Creations>,
    hints: &Outbox,
    creation: Creation,
) -> Result<Created, StoreError> {
    let task = creations.submit(creation).await?;
    hints.publish(rules::created_wakeups(&task));
    Ok(rules::created(task))
}

/// Creates a task under an idempotency key, or answers with the task the key already names.
pub(super) async fn create_claimed(
    pool: &PgPool,
    hints: &Outbox,
    creation: Creation,
    claim: IdempotencyClaim,
) -> Result<Created, StoreError> {
    let mut tx = pool.begin().await?;
    let task = single(insert_tasks(&mut tx, std::slice::from_ref(&creation)).await?)?;
    let new = &creation.new;
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
    .bind(creation.now)
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

/// Inserts the queued tasks and their `task.created` events (seq 1) in one statement, every
/// column bound as an array; the tasks come back in the members' order.
async fn insert_tasks(
    conn: &mut PgConnection,
    members: &[Creation],
) -> Result<Vec<Task>, StoreError> {
    let mut columns = NewColumns::default();
    for member in members {
        columns.push(member)?;
    }
    let rows = sqlx::query(concat!(
        "WITH input AS ( \
            SELECT * FROM UNNEST($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bigint[], \
                $6::bigint[], $7::bigint[], $8::jsonb[], $9::timestamptz[], $10::text[], \
                $12::text[], $13::text[], $14::bigint[]) \
                AS i(id, tenant_id, goal, strategy, budget_tokens, budget_tool_calls, \
                    budget_wall_ms, metadata, now, event, tools, approval, budget_cost) \
         ), created AS ( \
            INSERT INTO tasks (id, tenant_id, goal, strategy, budget_tokens, budget_tool_calls, \
                budget_wall_ms, metadata, status, created_at, updated_at, last_seq, tools, \
                approval, budget_cost) \
            SELECT id, tenant_id, goal, strategy, budget_tokens, budget_tool_calls, \
                budget_wall_ms, metadata, 'queued', now, now, 1, NULLIF(tools, ''), approval, \
                budget_cost \
            FROM input RETURNING * \
         ), logged AS ( \
            INSERT INTO events (task_id, seq, kind, data, created_at) \
            SELECT c.id, 1, $11, i.event, c.created_at FROM created c JOIN input i ON i.id = c.id \
         ) \
         SELECT ",
        task_columns!(),
        " FROM created"
    ))
    .bind(columns.ids)
    .bind(columns.tenants)
    .bind(columns.goals)
    .bind(columns.strategies)
    .bind(columns.tokens)
    .bind(columns.tool_calls)
    .bind(columns.wall_ms)
    .bind(columns.metadata)
    .bind(columns.nows)
    .bind(columns.events)
    .bind(kinds::TASK_CREATED)
    .bind(columns.tools)
    .bind(columns.approvals)
    .bind(columns.costs)
    .fetch_all(conn)
    .await?;
    let mut created = HashMap::with_capacity(rows.len());
    for row in &rows {
        let task = rows::task(row)?;
        created.insert(task.id, task);
    }
    members
        .iter()
        .map(|member| {
            created.remove(&member.new.id).ok_or_else(|| {
                StoreError::Corrupt(format!("task {} was not inserted", member.new.id))
            })
        })
        .collect()
}

/// A batch of new tasks turned inside out, one array per column.
#[derive(Default)]
struct NewColumns {
    ids: Vec<uuid::Uuid>,
    tenants: Vec<String>,
    goals: Vec<String>,
    strategies: Vec<&'static str>,
    tokens: Vec<i64>,
    tool_calls: Vec<i64>,
    wall_ms: Vec<i64>,
    metadata: Vec<Value>,
    nows: Vec<DateTime<Utc>>,
    /// The `task.created` payloads as JSON text (the column is `text`: migration 0007).
    events: Vec<String>,
    /// The tool lists as JSON text, `""` for none (`NULL` in the row).
    tools: Vec<String>,
    approvals: Vec<&'static str>,
    /// Money caps, `NULL` for none.
    costs: Vec<Option<i64>>,
}

impl NewColumns {
    fn push(&mut self, member: &Creation) -> Result<(), StoreError> {
        let new = &member.new;
        let budget = &new.budget;
        self.tokens
            .push(rows::bigint(budget.tokens, "budget.tokens")?);
        self.tool_calls
            .push(rows::bigint(budget.tool_calls, "budget.tool_calls")?);
        self.wall_ms
            .push(rows::bigint(budget.wall_ms, "budget.wall_ms")?);
        self.costs.push(
            budget
                .cost
                .map(|cost| rows::bigint(cost, "budget.cost"))
                .transpose()?,
        );
        self.ids.push(new.id);
        self.tenants.push(new.tenant_id.clone());
        self.goals.push(new.goal.clone());
        self.strategies.push(new.strategy.as_str());
        self.metadata.push(new.metadata.clone());
        self.nows.push(member.now);
        self.tools
            .push(rules::tools_text(new.tools.as_deref()).unwrap_or_default());
        self.approvals.push(new.approval.as_str());
        self.events
            .push(rules::created_event(new, member.by.as_deref()).to_string());
        Ok(())
    }
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

pub(super) async fn checkpoint(
    pool: &PgPool,
    tenant_id: &str,
    id: TaskId,
) -> Result<Option<serde_json::Value>, StoreError> {
    let text: Option<Option<String>> =
        sqlx::query_scalar("SELECT state FROM tasks WHERE tenant_id = $1 AND id = $2")
            .bind(tenant_id)
            .bind(id)
            .fetch_optional(pool)
            .await?;
    super::lease::checkpoint(text.flatten())
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
    .bind(rules::cancelled_event(current.status, by).to_string())
    .bind(now)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    hints.publish(rules::cancelled_wakeups(&task));
    Ok(CancelOutcome::Cancelled(task))
}
