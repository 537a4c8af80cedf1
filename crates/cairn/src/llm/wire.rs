//! The OpenAI chat-completions wire format, as far as cairn uses it.
//!
//! Responses are read leniently (every field but `choices` optional, content as a string or a
//! list of text parts) because "OpenAI-compatible" servers differ in what they fill in.

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Serialize)]
pub(crate) struct Request<'a> {
    pub model: &'a str,
    pub messages: &'a [super::ChatMessage],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    pub stream: bool,
}

#[derive(Debug, Serialize)]
pub(crate) struct ResponseFormat<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub json_schema: JsonSchemaFormat<'a>,
}

#[derive(Debug, Serialize)]
pub(crate) struct JsonSchemaFormat<'a> {
    pub name: &'a str,
    pub schema: &'a Value,
    /// Strict mode rejects common schema features (optional fields); validation happens here.
    pub strict: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Response {
    #[serde(default)]
    pub model: Option<String>,
    pub choices: Vec<Choice>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// Set by cairn's simulator; absent elsewhere.
    #[serde(default)]
    pub simulated: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Choice {
    pub message: Message,
    /// `stop`, `length` (the token budget ran out), ...; absent on some servers.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Message {
    #[serde(default)]
    pub content: Value,
}

impl Message {
    /// The text of the message: a string, or the concatenated text parts.
    pub fn text(&self) -> String {
        match &self.content {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub total_tokens: Option<u64>,
}

/// The human-readable message of an error body (`{"error": {"message": ..}}` or similar).
pub(crate) fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|value| {
        value
            .pointer("/error/message")
            .or_else(|| value.get("error"))
            .or_else(|| value.get("message"))
            .or_else(|| value.get("detail"))
            .and_then(|m| m.as_str().map(str::to_string))
    });
    crate::schema::truncate(message.as_deref().unwrap_or(body).trim(), 300)
}
