//! OpenAI-compatible chat client: the only way cairn talks to a model.
//!
//! Why a client of our own rather than a vendor SDK: cairn must work against any server that
//! speaks `POST /v1/chat/completions` (OpenAI, vLLM, llama.cpp, Ollama, LiteLLM, the built-in
//! simulator), and it needs three things those SDKs do not give together:
//!
//! - **structured output with a fallback**: the request carries a `response_format` JSON schema,
//!   but many servers ignore it, so the answer's JSON is extracted from the text and validated
//!   here ([`output`]); an answer that does not validate is [`LlmError::InvalidOutput`] with the
//!   validation messages, which the planner sends back to the model (bounded);
//! - **failure classes** the engine can act on: every error is [`FailureClass::Transient`]
//!   (retried here with jittered backoff, honouring `Retry-After`, up to a bound),
//!   [`FailureClass::Permanent`] or [`FailureClass::InvalidOutput`] ([`error`], [`retry`]);
//! - **usage** from the `usage` object, or an estimate marked as such ([`usage`]);
//! - **small real models**: a structured answer cut off at its token budget
//!   (`finish_reason: "length"`) is asked for once more with a larger budget before it is
//!   invalid output marked `truncated`; [`LlmError::is_unreachable`] tells an endpoint that
//!   could not be reached at all from one that answered badly; [`probe`] checks reachability
//!   for `/readyz`.
//!
//! Every call carries `X-Cairn-Purpose` and `X-Cairn-Task` (and, when relevant,
//! `X-Cairn-Milestone` and `X-Cairn-Attempt`): for observability, and because the simulator
//! matches scripted replies on them. A model per purpose comes from configuration
//! ([`Endpoints`]); the API key is held as a [`crate::secret::Secret`] and is read only when the
//! `Authorization` header is built: it never reaches a log line, an error or an event.

pub mod client;
pub mod endpoint;
pub mod error;
pub mod output;
pub mod probe;
pub mod request;
pub mod retry;
mod send;
pub mod usage;
mod wire;

pub use client::{Completion, LlmClient, TRUNCATED_RETRY_MAX_TOKENS};
pub use endpoint::{Endpoints, LlmEndpoint};
pub use error::{FailureClass, LlmError};
pub use probe::{EndpointProbe, ModelProbe, ProbeFailure};
pub use request::{ChatMessage, ChatRequest, OutputSchema};
pub use retry::RetryPolicy;
pub use usage::Usage;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Why a model is asked: each purpose can have its own endpoint and model.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    /// The plan-or-act gate: estimates the features its rules use.
    Gate,
    /// The strategic planner: milestones with checks.
    Strategic,
    /// The tactical planner: steps for one milestone, and the direct act loop.
    Tactical,
    /// The verifier of `verifier` checks and of the goal as a whole.
    Verifier,
}

impl Purpose {
    pub const ALL: [Purpose; 4] = [
        Purpose::Gate,
        Purpose::Strategic,
        Purpose::Tactical,
        Purpose::Verifier,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Gate => "gate",
            Purpose::Strategic => "strategic",
            Purpose::Tactical => "tactical",
            Purpose::Verifier => "verifier",
        }
    }

    pub fn parse(text: &str) -> Option<Purpose> {
        Self::ALL
            .into_iter()
            .find(|purpose| purpose.as_str() == text)
    }
}

impl std::fmt::Display for Purpose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Header names shared by the client and the simulator.
pub mod headers {
    pub const PURPOSE: &str = "x-cairn-purpose";
    pub const TASK: &str = "x-cairn-task";
    pub const MILESTONE: &str = "x-cairn-milestone";
    pub const ATTEMPT: &str = "x-cairn-attempt";
    /// Set by the simulator on everything it answers.
    pub const SIMULATED: &str = "x-cairn-simulated";
}
