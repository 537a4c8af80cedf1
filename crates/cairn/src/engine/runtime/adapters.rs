//! The ports over cairn's real clients: [`crate::llm::LlmClient`] for models and
//! [`crate::tools::ToolClient`] (schema check, idempotency key, receipts) for tools.
//!
//! The adapters only translate: purposes and headers, failure classes, the call's identity
//! (task, tool, args, repeat: the client derives the idempotency key from it), and a tool's
//! own reported error (an observation the monitor and
//! the repair ladder act on, not a transport failure).

use async_trait::async_trait;
use serde_json::{Value, json};

use super::ports::{
    FailureKind, ModelCall, ModelPort, ModelReply, PortError, Purpose, Sampling, Speaker,
    TokenSplit, ToolCall, ToolPort, ToolReply, ToolSpec,
};
use crate::llm::{self, ChatMessage, ChatRequest, FailureClass, LlmClient, LlmError};
use crate::tools::{self, ToolClient, ToolError};

/// Models through the OpenAI-compatible client.
pub struct LlmModels {
    client: LlmClient,
}

impl LlmModels {
    pub fn new(client: LlmClient) -> Self {
        Self { client }
    }

    /// The model configured for calls of `of` (what a trace names as the requested model).
    pub fn model(&self, of: Purpose) -> Option<&str> {
        self.client.model(purpose(of))
    }
}

fn purpose(purpose: Purpose) -> llm::Purpose {
    match purpose {
        Purpose::Gate => llm::Purpose::Gate,
        Purpose::Strategic => llm::Purpose::Strategic,
        Purpose::Tactical => llm::Purpose::Tactical,
        Purpose::Verifier => llm::Purpose::Verifier,
    }
}

/// The temperature of a [`Sampling::Explore`] call: warm enough to leave a repeated answer,
/// cool enough to stay on the schema's likeliest shapes.
pub const EXPLORE_TEMPERATURE: f32 = 0.7;

#[async_trait]
impl ModelPort for LlmModels {
    async fn complete(&self, call: ModelCall) -> Result<ModelReply, PortError> {
        let mut request = ChatRequest::new(purpose(call.purpose), messages(&call))
            .task(call.task_id)
            .max_tokens(call.max_tokens)
            .json_output(
                format!("cairn_{}", call.purpose.as_str()),
                call.schema.unwrap_or_else(|| json!({"type": "object"})),
            );
        request.retry_max_tokens = Some(call.retry_max_tokens);
        request.milestone = call.milestone;
        request.attempt = Some(call.attempt.max(1));
        request.temperature = match call.sampling {
            Sampling::Endpoint => None,
            Sampling::Explore => Some(EXPLORE_TEMPERATURE),
        };
        match self.client.complete(&request).await {
            Ok(completion) => {
                let value = completion
                    .json
                    .or_else(|| llm::output::extract_json(&completion.text))
                    .unwrap_or(Value::Null);
                Ok(ModelReply {
                    value,
                    tokens: completion.usage.total_tokens,
                    split: split(&completion.usage),
                    model: Some(completion.model),
                    asked_output: u64::from(completion.asked_tokens),
                    estimated: completion.usage.estimated,
                })
            }
            Err(error) => Err(model_error(&error)),
        }
    }
}

/// The instruction, the input, then the conversation so far: an earlier answer of the model
/// as its own (assistant) message, what came of it as the next user message.
fn messages(call: &ModelCall) -> Vec<ChatMessage> {
    // Compact: every token of the input is prompt a local model must read first.
    let text = |value: &Value| serde_json::to_string(value).unwrap_or_default();
    let mut messages = vec![
        ChatMessage::system(call.prompt.clone()),
        ChatMessage::user(text(&call.input)),
    ];
    messages.extend(call.turns.iter().map(|turn| match turn.speaker {
        Speaker::Model => ChatMessage::assistant(text(&turn.content)),
        Speaker::Engine => ChatMessage::user(text(&turn.content)),
    }));
    messages
}

fn model_error(error: &LlmError) -> PortError {
    let kind = match error.class() {
        FailureClass::Transient if error.is_unreachable() => FailureKind::Unreachable,
        FailureClass::Transient => FailureKind::Transient,
        FailureClass::Permanent => FailureKind::Permanent,
        FailureClass::InvalidOutput => FailureKind::InvalidOutput,
    };
    let usage = match error {
        LlmError::InvalidOutput { usage, .. } => *usage,
        _ => llm::Usage::default(),
    };
    PortError {
        kind,
        message: error.to_string(),
        tokens: usage.total_tokens,
        split: split(&usage),
        estimated: usage.estimated,
    }
}

fn split(usage: &llm::Usage) -> TokenSplit {
    TokenSplit {
        input: usage.prompt_tokens,
        output: usage.completion_tokens,
    }
}

/// Tools through the registry-backed client.
pub struct ClientTools {
    client: ToolClient,
    /// Calls go to the tools' `sandbox_url` where they have one (shadow runs).
    sandbox: bool,
}

impl ClientTools {
    pub fn new(client: ToolClient) -> Self {
        Self {
            client,
            sandbox: false,
        }
    }

    /// Calls sent to each tool's `sandbox_url` where it has one.
    pub fn sandboxed(client: ToolClient) -> Self {
        Self {
            client,
            sandbox: true,
        }
    }
}

#[async_trait]
impl ToolPort for ClientTools {
    fn specs(&self) -> Vec<ToolSpec> {
        self.client
            .registry()
            .specs()
            .map(|spec| ToolSpec {
                name: spec.name.clone(),
                description: spec.description.clone(),
                schema: spec.args_schema.clone(),
                side_effects: spec.side_effects,
                artifacts: spec.artifacts.clone(),
            })
            .collect()
    }

    async fn call(&self, call: ToolCall) -> Result<ToolReply, PortError> {
        let result = self
            .client
            .call(&tools::ToolCall {
                task_id: call.task_id,
                tool: call.tool,
                args: call.args,
                repeat: call.repeat,
                sandbox: self.sandbox,
            })
            .await;
        match result {
            Ok(result) => Ok(ToolReply {
                from_receipt: result.from_receipt,
                output: result.output,
                artifacts: result.artifacts,
                error: None,
            }),
            Err(ToolError::Reported {
                message, output, ..
            }) => Ok(ToolReply {
                from_receipt: false,
                output,
                artifacts: Default::default(),
                error: Some(message),
            }),
            Err(error) => {
                // Timeout, reset, 5xx, 429, 408, and a receipt store still failing after its
                // own retries (the database's trouble, not the tool's): the same call may
                // succeed (an unchanged L1), never a stale plan.
                let kind = if error.is_transient() {
                    FailureKind::Transient
                } else if matches!(error, ToolError::OutcomeUnknown { .. }) {
                    FailureKind::OutcomeUnknown
                } else {
                    FailureKind::Permanent
                };
                Err(PortError::new(kind, error.to_string()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::runtime::ports::Turn;

    #[test]
    fn a_conversation_follows_the_input_as_alternating_chat_messages() {
        let call = ModelCall {
            purpose: Purpose::Tactical,
            task_id: uuid::Uuid::nil(),
            milestone: None,
            attempt: 1,
            prompt: "decide".into(),
            input: json!({"goal": "g"}),
            turns: vec![
                Turn::model(json!({"tool": "t", "args": {}})),
                Turn::engine(json!({"result_of": "r1", "ok": true, "output": 1})),
            ],
            schema: None,
            sampling: Sampling::Endpoint,
            max_tokens: 1024,
            retry_max_tokens: 2048,
        };
        let sent: Vec<(String, String)> = messages(&call)
            .into_iter()
            .map(|m| (m.role, m.content))
            .collect();
        let roles: Vec<&str> = sent.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert_eq!(sent[1].1, r#"{"goal":"g"}"#);
        let call: Value = serde_json::from_str(&sent[2].1).unwrap_or_default();
        assert_eq!(call, json!({"tool": "t", "args": {}}));
    }
}
