//! Messages to a running task: a person steering it without restarting it.
//!
//! A message is committed by the API (`POST /v1/tasks/{id}/messages`), and the engine takes it
//! at its next durable point (`task.message`): a constraint is raised as a person's
//! (`plan.constraint_raised`), and a plan that did not know it is replanned with reason
//! `new_constraint`, keeping finished work. Messages are numbered per task from 1; the engine
//! keeps the number of the last one it took in its checkpoint, so a crash between the two loses
//! none and applies none twice.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The most messages one task takes. Each may replan the task once (a steering replan does not
/// use up the failure ladder's own), so this bounds steering replans too.
pub const MAX_TASK_MESSAGES: u32 = 16;

/// The longest message text, in characters.
pub const MAX_MESSAGE_CHARS: usize = 2000;

/// What a message asks of the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// A rule the plan must respect from now on (the planner sees it; a plan that did not know
    /// it is replaced).
    #[default]
    Constraint,
}

impl MessageKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::Constraint => "constraint",
        }
    }

    pub fn parse(text: &str) -> Option<MessageKind> {
        (text == "constraint").then_some(MessageKind::Constraint)
    }
}

/// The body of `POST /v1/tasks/{id}/messages`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageRequest {
    /// What the person says, in plain words: 1-2,000 characters, with no NUL and at least one
    /// character that is not whitespace, a control or an invisible character (a goal's rule).
    #[schema(
        min_length = 1,
        max_length = 2000,
        pattern = r"^[^\x00]*[^\x00-\x20\x7F-\xA0\u00AD\u1680\u180E\u2000-\u200D\u2028\u2029\u202F\u205F\u2060\u3000\uFEFF][^\x00]*$"
    )]
    pub text: String,
    #[serde(default)]
    pub kind: MessageKind,
}

impl MessageRequest {
    /// The text as it is stored, or why it cannot be.
    pub fn checked_text(&self) -> Result<String, String> {
        if super::task::is_blank(&self.text) {
            return Err(
                "`text` must not be empty (or only spaces and invisible characters)".into(),
            );
        }
        if self.text.chars().count() > MAX_MESSAGE_CHARS {
            return Err(format!(
                "`text` is longer than {MAX_MESSAGE_CHARS} characters"
            ));
        }
        if self.text.contains('\0') {
            return Err("`text` contains a NUL character".into());
        }
        Ok(self.text.trim().to_string())
    }
}

/// One message as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TaskMessage {
    /// The message's number within its task, from 1.
    pub seq: u32,
    pub kind: MessageKind,
    pub text: String,
    /// The API key that sent it, when the server has keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    #[serde(serialize_with = "crate::domain::instant::millis")]
    pub created_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(text: &str) -> MessageRequest {
        MessageRequest {
            text: text.into(),
            kind: MessageKind::Constraint,
        }
    }

    #[test]
    fn text_is_trimmed_and_bounded() {
        assert_eq!(
            request("  use the EU region ").checked_text(),
            Ok("use the EU region".into())
        );
        assert!(request("   ").checked_text().is_err());
        assert!(
            request(&"x".repeat(MAX_MESSAGE_CHARS + 1))
                .checked_text()
                .is_err()
        );
        assert!(request("a\0b").checked_text().is_err());
        assert_eq!(
            MessageKind::parse("constraint"),
            Some(MessageKind::Constraint)
        );
        assert_eq!(MessageKind::parse("order"), None);
    }
}
