//! The model and tool ports with a span per call ([`crate::traces`]): `chat {model}` (inside a
//! `plan` span for the planners' calls) and `execute_tool {tool}`, each the current span while
//! its call runs, so the request it sends carries its `traceparent`. Like the meters, they wrap
//! the ports every strategy calls, without the engine knowing.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use tracing::Instrument;

use crate::engine::runtime::adapters::LlmModels;
use crate::engine::runtime::ports::tool_outcome;
use crate::engine::runtime::ports::{
    ModelCall, ModelPort, ModelReply, PortError, Purpose, Speaker, ToolCall, ToolPort, ToolReply,
    ToolSpec,
};
use crate::traces::{self, Chat, ChatEnded};

/// The provider named on `chat` spans: cairn speaks the OpenAI chat-completions API to whatever
/// server the operator configured, so it cannot name the provider behind it.
const PROVIDER: &str = "openai_compatible";

pub struct TracedModels {
    pub inner: Arc<dyn ModelPort>,
    /// The model configured per purpose (`Purpose::as_str`), which names each `chat` span.
    pub requested: BTreeMap<&'static str, String>,
    /// Put the messages and the answer on the span (the operator's opt-in).
    pub capture_content: bool,
}

impl TracedModels {
    /// Traces the calls of `models`, naming the models they are configured with.
    pub fn over(models: LlmModels, capture_content: bool) -> TracedModels {
        let requested = [
            Purpose::Gate,
            Purpose::Strategic,
            Purpose::Tactical,
            Purpose::Verifier,
        ]
        .into_iter()
        .filter_map(|p| models.model(p).map(|m| (p.as_str(), m.to_string())))
        .collect();
        TracedModels {
            inner: Arc::new(models),
            requested,
            capture_content,
        }
    }
}

#[async_trait]
impl ModelPort for TracedModels {
    async fn complete(&self, call: ModelCall) -> Result<ModelReply, PortError> {
        let task_id = call.task_id.to_string();
        let purpose = call.purpose.as_str();
        let repair_level = call
            .input
            .get("repair")
            .and_then(|r| r.as_str())
            .map(str::to_string);
        let milestone = call.milestone.clone();
        let chat = Chat {
            provider: PROVIDER,
            request_model: self
                .requested
                .get(purpose)
                .map_or("unknown", String::as_str),
            purpose,
            task_id: &task_id,
            milestone: milestone.as_deref(),
            attempt: call.attempt,
            repair_level: repair_level.as_deref(),
        };
        let plan = chat.plan_span();
        let span = match &plan {
            Some(plan) => plan.in_scope(|| chat.span()),
            None => chat.span(),
        };
        if self.capture_content {
            traces::chat_input(&span, &messages(&call));
        }
        let called = self.inner.complete(call).instrument(span.clone());
        let result = match plan {
            Some(plan) => called.instrument(plan).await,
            None => called.await,
        };
        let ended = match &result {
            Ok(reply) => ChatEnded {
                model: reply.model.as_deref(),
                input_tokens: reply.split.input,
                output_tokens: reply.split.output,
                error: None,
                verdict: reply.value.get("verdict").and_then(|v| v.as_str()),
            },
            Err(error) => ChatEnded {
                model: None,
                input_tokens: error.split.input,
                output_tokens: error.split.output,
                error: Some(error.kind.as_str()),
                verdict: None,
            },
        };
        traces::chat_ended(&span, &ended);
        if let (true, Ok(reply)) = (self.capture_content, &result) {
            let answer = json!([message("assistant", reply.value.to_string())]);
            traces::chat_output(&span, &answer);
        }
        result
    }
}

/// A call's messages in the conventions' shape: the instruction, the input, then the turns.
fn messages(call: &ModelCall) -> Value {
    let mut all = vec![
        message("system", call.prompt.clone()),
        message("user", call.input.to_string()),
    ];
    all.extend(call.turns.iter().map(|turn| {
        let role = match turn.speaker {
            Speaker::Model => "assistant",
            Speaker::Engine => "user",
        };
        message(role, turn.content.to_string())
    }));
    Value::Array(all)
}

/// One message in the conventions' shape: a role and one text part.
fn message(role: &str, content: String) -> Value {
    json!({"role": role, "parts": [{"type": "text", "content": content}]})
}

pub struct TracedTools {
    pub inner: Arc<dyn ToolPort>,
}

#[async_trait]
impl ToolPort for TracedTools {
    fn specs(&self) -> Vec<ToolSpec> {
        self.inner.specs()
    }

    async fn call(&self, call: ToolCall) -> Result<ToolReply, PortError> {
        let span = traces::tool_span(&call.tool, &call.task_id.to_string());
        let result = self.inner.call(call).instrument(span.clone()).await;
        let outcome = tool_outcome(&result);
        let failed = !matches!(outcome, "ok" | "receipt");
        traces::tool_ended(&span, outcome, failed);
        result
    }
}
