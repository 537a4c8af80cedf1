//! [`McpError`]: why an MCP request produced no result.

/// Why an MCP request produced no result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    /// The server could not be reached or refused the handshake: nothing was sent.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The request was sent and its answer was lost (a dropped stream, a reset): what the
    /// server did is unknown.
    #[error("the connection failed during the request: {0}")]
    Transport(String),
    #[error("no answer within {0} ms")]
    Timeout(u64),
    /// The server answered with a JSON-RPC error (an unknown tool, invalid parameters).
    #[error("the server refused the request: {0}")]
    Refused(String),
    /// The server asked for input (`input_required`, elicitation, sampling): not supported.
    #[error(
        "the server asked for input (input_required: {0}), which cairn does not provide to \
         tools"
    )]
    InputRequired(String),
}

impl McpError {
    /// True when nothing reached the server (a retry cannot repeat a side effect).
    pub fn never_sent(&self) -> bool {
        matches!(self, McpError::Connect(_))
    }
}
