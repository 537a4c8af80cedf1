//! The tool client: schema check, idempotency key, receipt, the call (an HTTP POST, or an MCP
//! `tools/call`, [`mcp`]), classified answer.

mod mcp;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::catalog::ToolCatalog;
use super::error::ToolError;
use super::key::{Repeat, idempotency_key};
use super::receipts::ReceiptStore;
use super::registry::{RegisteredTool, ToolRegistry, ToolSource};
use crate::clock::Clock;
use crate::schema::truncate;
use crate::store::NewToolReceipt;

/// Header names of the tool contract.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
pub const TASK: &str = "x-cairn-task";

/// One tool call, identified by what it does: its idempotency key is derived from (task,
/// tool, canonical args, repeat), so an identical call gets the same key whichever step,
/// attempt or plan version makes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub task_id: Uuid,
    pub tool: String,
    pub args: Value,
    /// Tells a deliberate repetition of an identical call apart (see [`Repeat`]).
    pub repeat: Repeat,
    /// Shadow runs send calls to the tool's `sandbox_url` when it has one.
    pub sandbox: bool,
}

/// A tool's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub output: Value,
    /// Named artifacts the tool produced; they become artifacts of the active milestone.
    pub artifacts: BTreeMap<String, Value>,
    pub idempotency_key: String,
    /// True when the stored receipt answered and the tool was not called.
    pub from_receipt: bool,
    /// True when the tool is cairn's simulator.
    pub simulated: bool,
}

/// What a tool answers; also what a receipt stores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Answer {
    #[serde(default)]
    output: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    artifacts: Option<BTreeMap<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    simulated: bool,
}

/// Calls registered tools. Cheap to clone.
#[derive(Clone)]
pub struct ToolClient {
    http: reqwest::Client,
    catalog: ToolCatalog,
    receipts: Option<Arc<dyn ReceiptStore>>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for ToolClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolClient")
            .field("tools", &self.catalog.current().names())
            .field("receipts", &self.receipts.is_some())
            .finish()
    }
}

impl ToolClient {
    /// A client over `catalog` (a fixed registry, or one MCP servers feed). Without
    /// `receipts`, side-effecting calls are always sent.
    pub fn new(
        catalog: impl Into<ToolCatalog>,
        receipts: Option<Arc<dyn ReceiptStore>>,
        clock: Arc<dyn Clock>,
    ) -> ToolClient {
        ToolClient {
            http: reqwest::Client::new(),
            catalog: catalog.into(),
            receipts,
            clock,
        }
    }

    /// The registry now (MCP servers may change it between two reads).
    pub fn registry(&self) -> Arc<ToolRegistry> {
        self.catalog.current()
    }

    pub fn catalog(&self) -> &ToolCatalog {
        &self.catalog
    }

    /// Checks arguments without calling (the executor's approval step).
    pub fn check(&self, tool: &str, args: &Value) -> Result<(), ToolError> {
        self.lookup(&self.registry(), tool, args).map(|_| ())
    }

    fn lookup<'r>(
        &self,
        registry: &'r ToolRegistry,
        tool: &str,
        args: &Value,
    ) -> Result<&'r RegisteredTool, ToolError> {
        let registered = registry.get(tool).ok_or_else(|| self.missing(tool))?;
        let messages = registered.check_args(args);
        if messages.is_empty() {
            Ok(registered)
        } else {
            Err(ToolError::InvalidArgs {
                tool: tool.to_string(),
                messages,
            })
        }
    }

    /// Makes the call. Invalid arguments are refused before anything is sent; a side-effecting
    /// call whose key already has a receipt (an identical call performed before) returns the
    /// stored result without calling. Only a successful answer is stored, so a failed call
    /// is sent again on retry, with the same key.
    pub async fn call(&self, call: &ToolCall) -> Result<ToolResult, ToolError> {
        let registry = self.registry();
        let registered = self.lookup(&registry, &call.tool, &call.args)?;
        let spec = &registered.spec;
        let key = idempotency_key(call.task_id, &call.tool, &call.args, &call.repeat);
        let receipts = self.receipts.as_ref().filter(|_| spec.side_effects);
        let receipt_error = |source| ToolError::Receipt {
            tool: spec.name.clone(),
            source,
        };
        if let Some(store) = receipts
            && let Some(receipt) = store.get(call.task_id, &key).await.map_err(receipt_error)?
        {
            let answer = parse_answer(&spec.name, receipt.response)?;
            tracing::debug!(tool = %spec.name, key = %key, "answered from receipt");
            return Ok(into_result(answer, key, true));
        }
        let url = match (&spec.sandbox_url, call.sandbox) {
            (Some(sandbox), true) if spec.side_effects => sandbox,
            _ => &spec.url,
        };
        let answer = match &registered.source {
            ToolSource::File => {
                self.send(spec.name.as_str(), url, spec.timeout_ms, call, &key)
                    .await?
            }
            ToolSource::Mcp { server, tool } => {
                self.send_mcp(mcp::Send {
                    spec,
                    server,
                    tool,
                    url,
                    call,
                    key: &key,
                    receipts,
                })
                .await?
            }
        };
        if let Some(message) = &answer.error {
            return Err(ToolError::Reported {
                tool: spec.name.clone(),
                message: truncate(message, 2000),
                output: answer.output,
            });
        }
        let answer = match receipts {
            Some(store) => {
                let response =
                    serde_json::to_value(&answer).map_err(|error| ToolError::Contract {
                        tool: spec.name.clone(),
                        message: error.to_string(),
                    })?;
                let kept = store
                    .put(
                        NewToolReceipt {
                            idempotency_key: key.clone(),
                            task_id: call.task_id,
                            tool: spec.name.clone(),
                            response,
                        },
                        self.clock.now(),
                    )
                    .await
                    .map_err(receipt_error)?;
                // First write wins: if a concurrent holder of the same key stored first, its
                // result is the one every caller sees.
                parse_answer(&spec.name, kept.response)?
            }
            None => answer,
        };
        Ok(into_result(answer, key, false))
    }

    async fn send(
        &self,
        tool: &str,
        url: &str,
        timeout_ms: u64,
        call: &ToolCall,
        key: &str,
    ) -> Result<Answer, ToolError> {
        let mut request = self
            .http
            .post(url)
            .timeout(Duration::from_millis(timeout_ms))
            .header(IDEMPOTENCY_KEY, key)
            .header(TASK, call.task_id.to_string());
        // The call's span (crate::traces), so a tool that traces joins the task's trace.
        if let Some(traceparent) = crate::traces::traceparent() {
            request = request.header("traceparent", traceparent);
        }
        let response = request
            .json(&serde_json::json!({ "args": call.args }))
            .send()
            .await
            .map_err(|error| transport_error(tool, timeout_ms, &error))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|error| transport_error(tool, timeout_ms, &error))?;
        if !status.is_success() {
            return Err(ToolError::Http {
                tool: tool.to_string(),
                status: status.as_u16(),
                message: truncate(String::from_utf8_lossy(&body).trim(), 300),
            });
        }
        let value: Value = serde_json::from_slice(&body).map_err(|error| ToolError::Contract {
            tool: tool.to_string(),
            message: format!("the answer is not JSON ({error})"),
        })?;
        parse_answer(tool, value)
    }
}

fn transport_error(tool: &str, timeout_ms: u64, error: &reqwest::Error) -> ToolError {
    if error.is_timeout() {
        ToolError::Timeout {
            tool: tool.to_string(),
            timeout_ms,
        }
    } else {
        let mut message = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        ToolError::Transport {
            tool: tool.to_string(),
            message,
        }
    }
}

/// Checks the answer contract: an object with `output` (or `error`), `artifacts` an object of
/// named values, `error` a string.
fn parse_answer(tool: &str, value: Value) -> Result<Answer, ToolError> {
    let contract = |message: &str| ToolError::Contract {
        tool: tool.to_string(),
        message: message.to_string(),
    };
    let Value::Object(map) = &value else {
        return Err(contract(
            "expected a JSON object {output, artifacts?, error?}",
        ));
    };
    if !map.contains_key("output") && !map.contains_key("error") {
        return Err(contract("the answer has neither `output` nor `error`"));
    }
    if map
        .get("artifacts")
        .is_some_and(|a| !a.is_object() && !a.is_null())
    {
        return Err(contract("`artifacts` must be an object of named values"));
    }
    if map
        .get("error")
        .is_some_and(|e| !e.is_string() && !e.is_null())
    {
        return Err(contract("`error` must be a string"));
    }
    serde_json::from_value(value).map_err(|error| contract(&error.to_string()))
}

fn into_result(answer: Answer, idempotency_key: String, from_receipt: bool) -> ToolResult {
    ToolResult {
        output: answer.output,
        artifacts: answer.artifacts.unwrap_or_default(),
        idempotency_key,
        from_receipt,
        simulated: answer.simulated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_answer_contract_is_enforced() {
        assert!(parse_answer("t", json!({"output": 1})).is_ok());
        assert!(parse_answer("t", json!({"error": "no"})).is_ok());
        assert!(parse_answer("t", json!({"output": 1, "artifacts": {"a": [1]}})).is_ok());
        for bad in [
            json!([1]),
            json!({"result": 1}),
            json!({"output": 1, "artifacts": [1]}),
            json!({"output": 1, "error": 5}),
        ] {
            assert!(matches!(
                parse_answer("t", bad),
                Err(ToolError::Contract { .. })
            ));
        }
    }
}
