//! Messages to a task on Postgres: one transaction takes the task's row lock (so a message and
//! the task's end cannot cross) and numbers the message after the task's earlier ones.

use std::ops::ControlFlow;

use sqlx::{PgPool, Row};

use super::outbox::Outbox;
use super::rows::{self, task_columns};
use crate::domain::message::TaskMessage;
use crate::domain::task::TaskId;
use crate::store::StoreError;
use crate::store::messages::{self, PostMessage, PostOutcome};

pub(super) async fn post(
    pool: &PgPool,
    hints: &Outbox,
    post: PostMessage<'_>,
) -> Result<PostOutcome, StoreError> {
    let mut tx = pool.begin().await?;
    let current = sqlx::query(concat!(
        "SELECT ",
        task_columns!(),
        " FROM tasks WHERE tenant_id = $1 AND id = $2 FOR UPDATE"
    ))
    .bind(post.tenant_id)
    .bind(post.task_id)
    .fetch_optional(&mut *tx)
    .await?;
    let held: i64 = sqlx::query_scalar("SELECT count(*) FROM task_messages WHERE task_id = $1")
        .bind(post.task_id)
        .fetch_one(&mut *tx)
        .await?;
    let held = u32::try_from(held).unwrap_or(u32::MAX);
    let current = current.as_ref().map(rows::task).transpose()?;
    if let ControlFlow::Break(outcome) = messages::postable(current, held, post.limit) {
        return Ok(outcome);
    }
    let message = TaskMessage {
        seq: held + 1,
        kind: post.kind,
        text: post.text.to_string(),
        author: post.author.map(str::to_string),
        created_at: post.now,
    };
    sqlx::query(
        "INSERT INTO task_messages (task_id, seq, kind, text, author, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(post.task_id)
    .bind(i32::try_from(message.seq).unwrap_or(i32::MAX))
    .bind(message.kind.as_str())
    .bind(&message.text)
    .bind(&message.author)
    .bind(post.now)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    hints.publish(messages::posted_wakeups(post.task_id));
    Ok(PostOutcome::Posted(message))
}

pub(super) async fn list(
    pool: &PgPool,
    tenant_id: &str,
    task_id: TaskId,
    after: u32,
) -> Result<Vec<TaskMessage>, StoreError> {
    let found = sqlx::query(
        "SELECT m.seq, m.kind, m.text, m.author, m.created_at FROM task_messages m \
         JOIN tasks t ON t.id = m.task_id \
         WHERE t.tenant_id = $1 AND m.task_id = $2 AND m.seq > $3 ORDER BY m.seq",
    )
    .bind(tenant_id)
    .bind(task_id)
    .bind(i64::from(after))
    .fetch_all(pool)
    .await?;
    found
        .iter()
        .map(|row| {
            let seq: i32 = row.try_get("seq")?;
            let kind: String = row.try_get("kind")?;
            Ok(TaskMessage {
                seq: u32::try_from(seq).unwrap_or(0),
                kind: messages::stored_kind(&kind)?,
                text: row.try_get("text")?,
                author: row.try_get("author")?,
                created_at: row.try_get("created_at")?,
            })
        })
        .collect()
}
