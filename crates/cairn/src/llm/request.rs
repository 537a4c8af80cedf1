//! One logical model call as the engine asks it: the messages, the purpose and attempt it is
//! sent under, and the schema its answer must match.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::Purpose;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        Self::with_role("system", content)
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self::with_role("user", content)
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::with_role("assistant", content)
    }
    fn with_role(role: &str, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.to_string(),
            content: content.into(),
        }
    }
}

/// The JSON Schema an answer must match; sent as `response_format` and checked on receipt.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSchema {
    pub name: String,
    pub schema: Value,
}

/// One logical model call.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub purpose: Purpose,
    pub task_id: Option<Uuid>,
    /// The milestone this call is for (`direct` for the act loop), sent as `X-Cairn-Milestone`.
    pub milestone: Option<String>,
    /// The logical attempt (1-based) for this purpose and milestone, sent as `X-Cairn-Attempt`.
    pub attempt: Option<u32>,
    pub messages: Vec<ChatMessage>,
    /// When set, the answer must be JSON matching this schema.
    pub output: Option<OutputSchema>,
    pub max_tokens: Option<u32>,
    /// The most tokens the one re-ask of a cut-off structured answer may take: `None`, twice
    /// `max_tokens`; at most `max_tokens` (0 included), no re-ask. The engine sets it to what
    /// it reserved for the re-ask, so a retry never spends beyond the reservation.
    pub retry_max_tokens: Option<u32>,
    /// Sent as `temperature` when set; unset leaves the endpoint's default.
    pub temperature: Option<f32>,
}

impl ChatRequest {
    pub fn new(purpose: Purpose, messages: Vec<ChatMessage>) -> Self {
        ChatRequest {
            purpose,
            task_id: None,
            milestone: None,
            attempt: None,
            messages,
            output: None,
            max_tokens: None,
            retry_max_tokens: None,
            temperature: None,
        }
    }
    pub fn task(mut self, task_id: Uuid) -> Self {
        self.task_id = Some(task_id);
        self
    }
    pub fn milestone(mut self, milestone: impl Into<String>, attempt: u32) -> Self {
        self.milestone = Some(milestone.into());
        self.attempt = Some(attempt);
        self
    }
    /// The answer's token budget, sent as `max_tokens`.
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }
    pub fn json_output(mut self, name: impl Into<String>, schema: Value) -> Self {
        self.output = Some(OutputSchema {
            name: name.into(),
            schema,
        });
        self
    }
}
