//! The engine's two doors to the outside world: models and tools.
//!
//! Why ports rather than the clients themselves: the engine's decisions (what to ask, what to
//! charge, when to repair) must be testable without sockets, and the engine must not care
//! whether a model is OpenAI, vLLM or the simulator. [`ModelPort`] and [`ToolPort`] carry
//! exactly what the engine needs; adapters over the real LLM and tool clients live in
//! [`super::adapters`], fakes live in the tests.
//!
//! Every reply carries what the ledger charges: tokens for a model call; the wall-clock time
//! is measured by the caller around the call, so a slow port cannot misreport it.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::report::Cause;
use crate::domain::task::TaskId;
pub use crate::tools::Repeat;

/// Why a model is asked; each purpose can have its own model and the simulator scripts
/// replies by purpose, milestone and attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    Gate,
    Strategic,
    Tactical,
    Verifier,
}

impl Purpose {
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Gate => "gate",
            Purpose::Strategic => "strategic",
            Purpose::Tactical => "tactical",
            Purpose::Verifier => "verifier",
        }
    }
}

/// One question to a model. `prompt` is the instruction, `input` the structured context; the
/// answer must be one JSON object (validated by the caller against what it expects).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall {
    pub purpose: Purpose,
    pub task_id: TaskId,
    /// The milestone the call is about (`direct` for the act loop), if any.
    pub milestone: Option<String>,
    /// 1-based attempt for this purpose and milestone (re-asks and repairs raise it).
    pub attempt: u32,
    pub prompt: String,
    pub input: Value,
    /// The conversation so far, after `input`: the model's earlier answers and what came of
    /// them, in order (an act loop's calls and their observations). Sent as chat turns, the
    /// form models are trained to follow; empty for a single question.
    pub turns: Vec<Turn>,
    /// JSON Schema of the expected answer, sent as `response_format` where supported.
    pub schema: Option<Value>,
    pub sampling: Sampling,
    /// The answer's token budget (`max_tokens`): the purpose's own ([`answer_budget`]), or less
    /// when the milestone's books cannot cover its worst case (`super::reserve`).
    pub max_tokens: u32,
    /// The budget of the one re-ask of a cut-off answer: what was reserved for it, 0 for none.
    pub retry_max_tokens: u32,
}

impl ModelCall {
    /// The most prompt tokens this call can be charged: one per byte of every message (a
    /// byte-level tokenizer never makes more), the schema included (some providers put it in the
    /// prompt), plus each message's chat-template markers. What a reservation counts as the
    /// prompt, so a provider's own count can only be lower.
    pub fn prompt_bound(&self) -> u64 {
        let bytes = |value: &Value| serde_json::to_string(value).map_or(0, |text| text.len());
        let messages = 2 + self.turns.len();
        let text = self.prompt.len()
            + bytes(&self.input)
            + self.turns.iter().map(|t| bytes(&t.content)).sum::<usize>()
            + self.schema.as_ref().map_or(0, bytes);
        u64::try_from(text + messages * TEMPLATE_TOKENS_PER_MESSAGE + TEMPLATE_TOKENS_PER_CALL)
            .unwrap_or(u64::MAX)
    }
}

/// Chat-template tokens around each message (role markers, separators), generously counted.
const TEMPLATE_TOKENS_PER_MESSAGE: usize = 8;
/// The assistant's opening markers, and a system preamble some servers add.
const TEMPLATE_TOKENS_PER_CALL: usize = 32;

/// The most tokens an answer of each purpose may take. A small model constrained by a grammar
/// can loop (repeating a field, or whitespace) until its context is full, and a local server
/// keeps generating for a request its client gave up on; a budget bounds both. The answers fit
/// well within them (a gate estimate is a few fields, a plan at most six milestones, a step list
/// a few calls, a verdict one sentence); an answer cut short is detected and asked again once
/// with twice the budget (`crate::llm`), when the books can cover it.
pub fn answer_budget(purpose: Purpose) -> u32 {
    match purpose {
        Purpose::Gate => 256,
        Purpose::Strategic => 1536,
        Purpose::Tactical => 1024,
        Purpose::Verifier => 384,
    }
}

/// The smallest budget an answer of each purpose is sent with when the books cannot cover its
/// own (a quarter of it): below that a structured answer is likely cut off, and a cut-off
/// answer is charged all the same, so the call is refused instead.
pub fn least_answer(purpose: Purpose) -> u32 {
    answer_budget(purpose) / 4
}

/// How the model samples its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sampling {
    /// The endpoint's own setting (the local model is served at temperature 0).
    #[default]
    Endpoint,
    /// A re-ask after the model proposed again what already failed: at temperature 0 the same
    /// question gets the same answer, so this one is sampled warmer.
    Explore,
}

/// Who said one [`Turn`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Speaker {
    /// The model: one of its earlier answers.
    Model,
    /// The engine: what came of that answer (a tool's output or error).
    Engine,
}

/// One message of a conversation with a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    pub speaker: Speaker,
    pub content: Value,
}

impl Turn {
    pub fn model(content: Value) -> Turn {
        Turn {
            speaker: Speaker::Model,
            content,
        }
    }

    pub fn engine(content: Value) -> Turn {
        Turn {
            speaker: Speaker::Engine,
            content,
        }
    }
}

/// A model's answer: the parsed JSON object and what it cost.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelReply {
    pub value: Value,
    /// Everything the call cost: what the ledger charges.
    pub tokens: u64,
    /// The same tokens told apart, where the endpoint reported (or cairn estimated) them.
    pub split: TokenSplit,
    /// The model that answered, as the endpoint named it.
    pub model: Option<String>,
    /// The answer tokens the endpoint was asked for in all (the answer's `max_tokens`, and the
    /// re-ask's when there was one); 0 when unknown.
    pub asked_output: u64,
    /// The endpoint reported no usage: `tokens` and `split` are cairn's estimate.
    pub estimated: bool,
}

/// A call's tokens told apart: read (the prompt) and written (the answer). Metrics and
/// traces report them separately; prices differ between the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenSplit {
    pub input: u64,
    pub output: u64,
}

/// One tool as the operator registered it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the tool's arguments.
    #[serde(default)]
    pub schema: Value,
    /// Whether a call changes the world (and therefore needs a receipt to never run twice).
    #[serde(default)]
    pub side_effects: bool,
    /// The names of the artifacts a call may produce, as the operator declared them. When any
    /// tool declares some, a plan's artifact and schema checks may name only artifacts a tool
    /// of their milestone declares (`domain::plan::validate`), and the strategic schema offers only
    /// declared names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<String>,
}

/// One tool call, identified by what it does. The idempotency key is derived from `(task,
/// tool, canonical args, repeat)`: an identical side-effecting call already performed (before
/// a resume, in an earlier attempt, repair or plan version) is answered from its receipt and
/// not sent again. `repeat` is [`Repeat::Nth`] with the count of earlier identical actions in
/// the same step list (0 almost always), or [`Repeat::Check`] for an acceptance check.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub task_id: TaskId,
    pub tool: String,
    pub args: Value,
    pub repeat: Repeat,
}

/// What a tool answered: its output, named artifacts, or an error it reported.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolReply {
    pub output: Value,
    pub artifacts: BTreeMap<String, Value>,
    pub error: Option<String>,
    /// The answer is a stored receipt's: an identical side effect was performed before, and the
    /// tool was not called again.
    pub from_receipt: bool,
}

/// Whether repeating a failed call may help.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    Transient,
    /// The endpoint could not be reached at all (after the client's own retries).
    Unreachable,
    Permanent,
    /// The model answered, but not with the JSON asked for.
    InvalidOutput,
    /// A side-effecting call whose earlier identical call was in flight when its answer was
    /// lost; it was not sent again, and whether it happened is unknown (a read can tell).
    OutcomeUnknown,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Transient => "transient",
            FailureKind::Unreachable => "unreachable",
            FailureKind::Permanent => "permanent",
            FailureKind::InvalidOutput => "invalid_output",
            FailureKind::OutcomeUnknown => "outcome_unknown",
        }
    }
}

/// How a tool call came out, as the meters and the traces label it: `ok`, `error` when the
/// tool answered one, `receipt` when a stored receipt answered and the tool was not called, or
/// the failure's class.
pub fn tool_outcome(result: &Result<ToolReply, PortError>) -> &'static str {
    match result {
        Ok(reply) if reply.from_receipt => "receipt",
        Ok(reply) if reply.error.is_none() => "ok",
        Ok(_) => "error",
        Err(error) => error.kind.as_str(),
    }
}

/// A call that produced no usable answer. `tokens` were still spent and are still charged.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct PortError {
    pub kind: FailureKind,
    pub message: String,
    pub tokens: u64,
    /// `tokens` told apart, when the call got as far as an answer.
    pub split: TokenSplit,
    /// The endpoint reported no usage: `tokens` and `split` are cairn's estimate.
    pub estimated: bool,
}

impl PortError {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            tokens: 0,
            split: TokenSplit::default(),
            estimated: false,
        }
    }
}

/// The named cause of a phase whose every model call failed alike (`None` when there were no
/// calls, when any answered, or when they failed differently). `failures` holds one entry per
/// call: the failure's kind, `None` for an answer.
pub fn model_cause(failures: &[Option<FailureKind>]) -> Option<Cause> {
    let all = |kind| !failures.is_empty() && failures.iter().all(|k| *k == Some(kind));
    if all(FailureKind::Unreachable) {
        Some(Cause::ModelUnreachable)
    } else if all(FailureKind::InvalidOutput) {
        Some(Cause::ModelInvalidOutput)
    } else {
        None
    }
}

#[async_trait]
pub trait ModelPort: Send + Sync + 'static {
    async fn complete(&self, call: ModelCall) -> Result<ModelReply, PortError>;
}

#[async_trait]
pub trait ToolPort: Send + Sync + 'static {
    /// The registered tools (the executor checks steps against these schemas).
    fn specs(&self) -> Vec<ToolSpec>;

    async fn call(&self, call: ToolCall) -> Result<ToolReply, PortError>;
}
