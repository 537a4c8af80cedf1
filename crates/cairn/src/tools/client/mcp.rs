//! The MCP leg of [`ToolClient::call`]: the intent written before a side-effecting call, the
//! `tools/call`, and the answer in the tool contract's terms.
//!
//! The receipt covers a crash after the answer and before its commit, as for HTTP tools. The
//! window before the answer is the intent's: an MCP server honours no idempotency key, so a
//! side-effecting call (not declared idempotent) writes an intent first, and an identical call
//! that finds an intent without a receipt is not sent again (`outcome_unknown`). The intent is
//! removed when the outcome is known not to be a success: the server was never reached, it
//! refused the request, or the tool answered an error.

use std::sync::Arc;

use super::{Answer, ToolCall, ToolClient};
use crate::store::NewToolReceipt;
use crate::tools::ToolSpec;
use crate::tools::error::ToolError;
use crate::tools::mcp::{McpCall, McpError, map};
use crate::tools::receipts::ReceiptStore;

/// One MCP call, as [`ToolClient::call`] prepared it.
pub(super) struct Send<'a> {
    pub spec: &'a ToolSpec,
    pub server: &'a str,
    pub tool: &'a str,
    /// The server's URL, or its sandbox's in a shadow run.
    pub url: &'a str,
    pub call: &'a ToolCall,
    pub key: &'a str,
    /// Present for a side-effecting call when receipts are kept.
    pub receipts: Option<&'a Arc<dyn ReceiptStore>>,
}

/// The key an intent is stored under, beside the call's receipt.
fn intent_key(key: &str) -> String {
    format!("intent:{key}")
}

impl ToolClient {
    /// The error for a tool the registry does not hold: unavailable when its MCP server is
    /// registered (listed before, gone since), unknown otherwise.
    pub(super) fn missing(&self, tool: &str) -> ToolError {
        let server = tool.split_once('.').map(|(server, _)| server);
        match (server, self.catalog.mcp()) {
            (Some(server), Some(mcp)) if mcp.server(server).is_some() => ToolError::Unavailable {
                tool: tool.to_string(),
                message: format!("the MCP server {server:?} does not list it now"),
            },
            _ => ToolError::UnknownTool {
                tool: tool.to_string(),
            },
        }
    }

    pub(super) async fn send_mcp(&self, send: Send<'_>) -> Result<Answer, ToolError> {
        let name = &send.spec.name;
        let unavailable = |message: String| ToolError::Unavailable {
            tool: name.clone(),
            message,
        };
        let mcp = self
            .catalog
            .mcp()
            .ok_or_else(|| unavailable("no MCP server is registered".into()))?;
        let server = mcp
            .server(send.server)
            .ok_or_else(|| unavailable(format!("the MCP server {:?} is gone", send.server)))?;
        let intent = send.receipts.filter(|_| !send.spec.idempotent);
        let task_id = send.call.task_id;
        let receipt_error = |source| ToolError::Receipt {
            tool: name.clone(),
            source,
        };
        if let Some(store) = intent {
            let key = intent_key(send.key);
            if store
                .get(task_id, &key)
                .await
                .map_err(receipt_error)?
                .is_some()
            {
                return Err(ToolError::OutcomeUnknown { tool: name.clone() });
            }
            let record = NewToolReceipt {
                idempotency_key: key,
                task_id,
                tool: name.clone(),
                response: serde_json::json!({ "intent": true }),
            };
            store
                .put(record, self.clock.now())
                .await
                .map_err(receipt_error)?;
        }
        let result = mcp
            .hub()
            .call(McpCall {
                server,
                url: send.url,
                tool: send.tool,
                args: &send.call.args,
                traceparent: crate::traces::traceparent(),
            })
            .await;
        let answered = result.as_ref().ok().map(|r| r.is_error == Some(true));
        let settled = matches!(answered, Some(true))
            || result
                .as_ref()
                .err()
                .is_some_and(|e| e.never_sent() || matches!(e, McpError::Refused(_)));
        if let (Some(store), true) = (intent, settled) {
            store
                .forget(task_id, &intent_key(send.key))
                .await
                .map_err(receipt_error)?;
        }
        let answered = map::answer(
            result.map_err(|error| failure(name, server.timeout_ms, error))?,
            &send.spec.artifacts,
        );
        Ok(Answer {
            output: answered.output,
            artifacts: Some(answered.artifacts),
            error: answered.error,
            simulated: false,
        })
    }
}

/// An MCP failure in the tool contract's classes: unreachable and dropped streams are
/// transient (a read is retried; a write finds its intent), a refusal or a request for input
/// is the tool's own error, which the repair ladder reads.
fn failure(tool: &str, timeout_ms: u64, error: McpError) -> ToolError {
    let tool = tool.to_string();
    match error {
        McpError::Timeout(_) => ToolError::Timeout { tool, timeout_ms },
        McpError::Connect(message) | McpError::Transport(message) => {
            ToolError::Transport { tool, message }
        }
        refused @ (McpError::Refused(_) | McpError::InputRequired(_)) => ToolError::Reported {
            tool,
            message: refused.to_string(),
            output: serde_json::Value::Null,
        },
    }
}
