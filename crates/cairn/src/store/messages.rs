//! Messages to a task as both backends store them: what a post asks, how it can end, and the
//! rules they share. A post writes no event: the task's events are the engine's under its
//! lease (a foreign event would move the seqs it hands out for links), so the engine records
//! `task.message` when it takes the message.

use std::ops::ControlFlow;

use chrono::{DateTime, Utc};

use super::Wakeup;
use crate::domain::message::{MessageKind, TaskMessage};
use crate::domain::task::{Strategy, Task, TaskId, TaskStatus};

/// A message to commit to a task.
#[derive(Debug, Clone, PartialEq)]
pub struct PostMessage<'a> {
    pub tenant_id: &'a str,
    pub task_id: TaskId,
    pub kind: MessageKind,
    /// Checked already (`MessageRequest::checked_text`).
    pub text: &'a str,
    /// The API key that sends it.
    pub author: Option<&'a str>,
    /// Most messages one task takes (`domain::message::MAX_TASK_MESSAGES`).
    pub limit: u32,
    pub now: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PostOutcome {
    /// No such task for this tenant.
    NotFound,
    /// The task runs a strategy that takes no messages (a baseline); nothing was written.
    NotPlanned(Strategy),
    /// The task has ended with this status; nothing was written.
    Finished(TaskStatus),
    /// The task already holds `limit` messages; nothing was written.
    Full { limit: u32 },
    /// Committed; the engine takes it at its next durable point.
    Posted(TaskMessage),
}

/// Whether a message may be posted to `current` that already holds `held` messages: a task of
/// a strategy that takes messages, not ended, below the limit.
pub(crate) fn postable(
    current: Option<Task>,
    held: u32,
    limit: u32,
) -> ControlFlow<PostOutcome, Task> {
    match current {
        None => ControlFlow::Break(PostOutcome::NotFound),
        Some(task) if !task.strategy.takes_messages() => {
            ControlFlow::Break(PostOutcome::NotPlanned(task.strategy))
        }
        Some(task) if task.status.is_terminal() => {
            ControlFlow::Break(PostOutcome::Finished(task.status))
        }
        Some(_) if held >= limit => ControlFlow::Break(PostOutcome::Full { limit }),
        Some(task) => ControlFlow::Continue(task),
    }
}

/// The hint after a post, for the worker running the task.
pub(crate) fn posted_wakeups(task_id: TaskId) -> Vec<Wakeup> {
    vec![Wakeup::Message { task_id }]
}

/// A stored message's kind, or a clear error for one this version does not know.
pub(crate) fn stored_kind(text: &str) -> Result<MessageKind, super::StoreError> {
    MessageKind::parse(text)
        .ok_or_else(|| super::StoreError::Corrupt(format!("unknown message kind {text:?}")))
}
