//! Typed failures of a model call, each in one of three classes the engine acts on.
//!
//! - transient: the call may succeed if repeated (connect error, timeout, 429, 5xx, a body cut
//!   short). The client already retried these up to its bound; `attempts` says how often.
//! - permanent: repeating will not help (4xx other than 408/429, no endpoint configured).
//! - invalid output: the model answered, but not with JSON matching the requested schema. The
//!   planner sends `messages` back to the model; the tokens were spent, so `usage` is kept.
//!   `truncated` says the answer was cut off at its token budget (`finish_reason: "length"`)
//!   even after the client's one retry with a larger budget.
//!
//! Within the transient class, [`LlmError::is_unreachable`] names the failures where the
//! endpoint was never reached at all (connection refused, DNS, connect timeout), as opposed to
//! a server that answered badly or too slowly.
//!
//! Messages never carry the API key: server-provided text is passed through
//! [`crate::llm::client`]'s redaction before it is stored here.

use super::{Purpose, Usage};
use serde::Serialize;
use std::time::Duration;

/// The three classes every failure falls into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    Transient,
    Permanent,
    InvalidOutput,
}

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("{purpose} model: could not connect after {attempts} attempt(s): {message}")]
    Connect {
        purpose: Purpose,
        attempts: u32,
        message: String,
    },
    #[error("{purpose} model: timed out after {timeout:?} ({attempts} attempt(s))")]
    Timeout {
        purpose: Purpose,
        attempts: u32,
        timeout: Duration,
    },
    #[error("{purpose} model: rate limited (HTTP 429) after {attempts} attempt(s)")]
    RateLimited {
        purpose: Purpose,
        attempts: u32,
        /// The last `Retry-After` the server asked for, if any.
        retry_after: Option<Duration>,
    },
    #[error("{purpose} model: server error HTTP {status} after {attempts} attempt(s): {message}")]
    Server {
        purpose: Purpose,
        attempts: u32,
        status: u16,
        message: String,
    },
    #[error(
        "{purpose} model: response was cut short or unreadable after {attempts} attempt(s): {message}"
    )]
    BadResponse {
        purpose: Purpose,
        attempts: u32,
        message: String,
    },
    #[error("{purpose} model: request refused with HTTP {status}: {message}")]
    Refused {
        purpose: Purpose,
        status: u16,
        message: String,
    },
    #[error("{purpose} model: {message}")]
    Setup { purpose: Purpose, message: String },
    #[error(
        "{purpose} model: invalid output{}: {}",
        if *truncated { " (cut off at the token limit)" } else { "" },
        messages.join("; ")
    )]
    InvalidOutput {
        purpose: Purpose,
        /// HTTP requests made (2 or more when a truncated answer was asked for again).
        attempts: u32,
        /// The (last) answer stopped at its token budget (`finish_reason: "length"`).
        truncated: bool,
        /// What was wrong, bounded; sent back to the planner.
        messages: Vec<String>,
        /// The model's text, bounded, for the audit trail.
        raw: String,
        /// Tokens spent on the answer that did not validate.
        usage: Usage,
    },
}

impl LlmError {
    pub fn class(&self) -> FailureClass {
        match self {
            LlmError::Connect { .. }
            | LlmError::Timeout { .. }
            | LlmError::RateLimited { .. }
            | LlmError::Server { .. }
            | LlmError::BadResponse { .. } => FailureClass::Transient,
            LlmError::Refused { .. } | LlmError::Setup { .. } => FailureClass::Permanent,
            LlmError::InvalidOutput { .. } => FailureClass::InvalidOutput,
        }
    }

    /// HTTP requests made before giving up (1 for failures that are never retried).
    pub fn attempts(&self) -> u32 {
        match self {
            LlmError::Connect { attempts, .. }
            | LlmError::Timeout { attempts, .. }
            | LlmError::RateLimited { attempts, .. }
            | LlmError::Server { attempts, .. }
            | LlmError::BadResponse { attempts, .. }
            | LlmError::InvalidOutput { attempts, .. } => *attempts,
            LlmError::Refused { .. } => 1,
            LlmError::Setup { .. } => 0,
        }
    }

    /// True when the endpoint could not be reached at all after the bounded retries: the
    /// connection was refused, the host name did not resolve, or connecting timed out. A
    /// server that answered (any status, a cut body) or accepted the connection and then
    /// went silent is not unreachable.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, LlmError::Connect { .. })
    }

    /// True for invalid output whose answer was cut off at the token limit.
    pub fn is_truncated(&self) -> bool {
        matches!(
            self,
            LlmError::InvalidOutput {
                truncated: true,
                ..
            }
        )
    }

    /// A short stable name for events and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            LlmError::Connect { .. } => "connect",
            LlmError::Timeout { .. } => "timeout",
            LlmError::RateLimited { .. } => "rate_limited",
            LlmError::Server { .. } => "server_error",
            LlmError::BadResponse { .. } => "bad_response",
            LlmError::Refused { .. } => "refused",
            LlmError::Setup { .. } => "setup",
            LlmError::InvalidOutput { .. } => "invalid_output",
        }
    }
}
