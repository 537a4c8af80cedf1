//! Typed failures of a tool call, classified so the engine can choose a repair.

use serde::Serialize;
use serde_json::Value;

use crate::store::StoreError;

/// The class of a tool failure, as recorded in events and counted in reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolFailure {
    /// Not in the registry: a planner or executor mistake, never sent.
    UnknownTool,
    /// Arguments broke the tool's schema: never sent.
    InvalidArgs,
    Timeout,
    /// Could not reach the tool, or its answer was cut short.
    Transport,
    /// HTTP 4xx.
    ClientError,
    /// HTTP 5xx.
    ServerError,
    /// The answer broke the `{output, artifacts?, error?}` contract.
    ContractViolation,
    /// The tool answered, reporting an error of its own.
    ToolError,
    /// Reading or writing the receipt failed.
    Receipt,
    /// The tool left the registry since the plan was made (its MCP server no longer lists
    /// it): never sent.
    ToolUnavailable,
    /// A side-effecting call was in flight when its answer was lost (a crash, a dropped
    /// stream), and the tool takes no idempotency key: it is not sent again.
    OutcomeUnknown,
}

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("tool {tool:?} is not registered")]
    UnknownTool { tool: String },
    #[error("tool {tool:?}: arguments do not match its schema: {}", messages.join("; "))]
    InvalidArgs { tool: String, messages: Vec<String> },
    #[error("tool {tool:?}: no answer within {timeout_ms} ms")]
    Timeout { tool: String, timeout_ms: u64 },
    #[error(
        "tool {tool:?}: transport failed (unreachable, or the answer was cut short): {message}"
    )]
    Transport { tool: String, message: String },
    #[error("tool {tool:?}: HTTP {status}: {message}")]
    Http {
        tool: String,
        status: u16,
        message: String,
    },
    #[error("tool {tool:?}: answer breaks the tool contract: {message}")]
    Contract { tool: String, message: String },
    #[error("tool {tool:?} reported an error: {message}")]
    Reported {
        tool: String,
        message: String,
        /// Whatever `output` came with the error.
        output: Value,
    },
    #[error("tool {tool:?} is no longer available: {message}")]
    Unavailable { tool: String, message: String },
    #[error(
        "tool {tool:?}: an identical call was sent before and its answer was lost (the process \
         stopped or the connection dropped while it was in flight); the tool takes no \
         idempotency key, so cairn does not send it again: read the state to learn whether it \
         happened"
    )]
    OutcomeUnknown { tool: String },
    #[error("tool {tool:?}: receipt store failed: {source}")]
    Receipt {
        tool: String,
        #[source]
        source: StoreError,
    },
}

impl ToolError {
    pub fn failure(&self) -> ToolFailure {
        match self {
            ToolError::UnknownTool { .. } => ToolFailure::UnknownTool,
            ToolError::InvalidArgs { .. } => ToolFailure::InvalidArgs,
            ToolError::Timeout { .. } => ToolFailure::Timeout,
            ToolError::Transport { .. } => ToolFailure::Transport,
            ToolError::Http { status, .. } if *status >= 500 => ToolFailure::ServerError,
            ToolError::Http { .. } => ToolFailure::ClientError,
            ToolError::Contract { .. } => ToolFailure::ContractViolation,
            ToolError::Reported { .. } => ToolFailure::ToolError,
            ToolError::Receipt { .. } => ToolFailure::Receipt,
            ToolError::Unavailable { .. } => ToolFailure::ToolUnavailable,
            ToolError::OutcomeUnknown { .. } => ToolFailure::OutcomeUnknown,
        }
    }

    /// Whether repeating the same call may succeed (an L1 retry is worth it).
    pub fn is_transient(&self) -> bool {
        match self {
            ToolError::Timeout { .. } | ToolError::Transport { .. } | ToolError::Receipt { .. } => {
                true
            }
            ToolError::Http { status, .. } => *status >= 500 || *status == 429 || *status == 408,
            _ => false,
        }
    }

    /// True when the call was refused before anything was sent (executor drift).
    pub fn never_sent(&self) -> bool {
        matches!(
            self,
            ToolError::UnknownTool { .. }
                | ToolError::InvalidArgs { .. }
                | ToolError::Unavailable { .. }
                | ToolError::OutcomeUnknown { .. }
        )
    }
}
