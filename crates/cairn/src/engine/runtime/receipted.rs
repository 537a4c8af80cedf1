//! Receipts in front of any [`ToolPort`]: an identical side-effecting call is performed once.
//!
//! The HTTP tool client keeps receipts itself ([`crate::tools::ToolClient`]); a port that is
//! not that client (the evaluation's simulated world) gets the same guarantee from this
//! wrapper. The rule is the client's: the idempotency key is derived from (task, tool,
//! canonical arguments, [`Repeat`]); a side-effecting call whose key already has a receipt is
//! answered from it without calling; only a successful answer is stored (first write wins),
//! so a failed call, or one whose tool reported an error, is sent again on retry. Read-only
//! calls always reach the port.
//!
//! [`Repeat`]: super::ports::Repeat

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::ports::{FailureKind, PortError, ToolCall, ToolPort, ToolReply, ToolSpec};
use crate::clock::Clock;
use crate::store::NewToolReceipt;
use crate::tools::{ReceiptStore, idempotency_key};

/// `inner`'s tools with receipts kept in `receipts`.
pub struct Receipted<T: ?Sized> {
    inner: Arc<T>,
    receipts: Arc<dyn ReceiptStore>,
    clock: Arc<dyn Clock>,
}

impl<T: ToolPort + ?Sized> Receipted<T> {
    pub fn new(inner: Arc<T>, receipts: Arc<dyn ReceiptStore>, clock: Arc<dyn Clock>) -> Self {
        Self {
            inner,
            receipts,
            clock,
        }
    }

    fn side_effects(&self, tool: &str) -> bool {
        self.inner
            .specs()
            .iter()
            .any(|spec| spec.name == tool && spec.side_effects)
    }
}

/// A receipt store still failing after its own retries is the database's trouble, not the
/// tool's: the same call may succeed later (an unchanged L1), never a stale plan.
fn receipt_fault(tool: &str, error: impl std::fmt::Display) -> PortError {
    PortError::new(
        FailureKind::Transient,
        format!("{tool}: the receipt store failed: {error}"),
    )
}

/// What a receipt keeps of a reply.
fn stored(reply: &ToolReply) -> Value {
    json!({ "output": reply.output, "artifacts": reply.artifacts })
}

/// The reply a receipt holds.
fn replayed(response: &Value) -> ToolReply {
    let artifacts: BTreeMap<String, Value> = response
        .get("artifacts")
        .and_then(Value::as_object)
        .map(|map| map.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    ToolReply {
        from_receipt: true,
        output: response.get("output").cloned().unwrap_or(Value::Null),
        artifacts,
        error: None,
    }
}

#[async_trait]
impl<T: ToolPort + ?Sized> ToolPort for Receipted<T> {
    fn specs(&self) -> Vec<ToolSpec> {
        self.inner.specs()
    }

    async fn call(&self, call: ToolCall) -> Result<ToolReply, PortError> {
        if !self.side_effects(&call.tool) {
            return self.inner.call(call).await;
        }
        let key = idempotency_key(call.task_id, &call.tool, &call.args, &call.repeat);
        let (task_id, tool) = (call.task_id, call.tool.clone());
        let found = self
            .receipts
            .get(task_id, &key)
            .await
            .map_err(|e| receipt_fault(&tool, e))?;
        if let Some(receipt) = found {
            tracing::debug!(tool = %tool, key = %key, "answered from receipt");
            return Ok(replayed(&receipt.response));
        }
        let reply = self.inner.call(call).await?;
        if reply.error.is_some() {
            return Ok(reply);
        }
        let receipt = NewToolReceipt {
            idempotency_key: key,
            task_id,
            tool: tool.clone(),
            response: stored(&reply),
        };
        let kept = self
            .receipts
            .put(receipt, self.clock.now())
            .await
            .map_err(|e| receipt_fault(&tool, e))?;
        // First write wins: a concurrent holder of the same key that stored first decides
        // what every caller sees.
        Ok(replayed(&kept.response))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::sync::Mutex;

    use super::*;
    use crate::clock::SystemClock;
    use crate::engine::runtime::ports::Repeat;
    use crate::tools::MemoryReceipts;

    /// Counts what reaches it; `fail` makes the tool report an error.
    #[derive(Default)]
    struct Counting {
        calls: Mutex<Vec<(String, Value)>>,
        fail: Mutex<bool>,
    }

    #[async_trait]
    impl ToolPort for Counting {
        fn specs(&self) -> Vec<ToolSpec> {
            let spec = |name: &str, side_effects| ToolSpec {
                name: name.into(),
                description: String::new(),
                schema: json!({"type": "object"}),
                side_effects,
                artifacts: Vec::new(),
            };
            vec![spec("write", true), spec("read", false)]
        }
        async fn call(&self, call: ToolCall) -> Result<ToolReply, PortError> {
            let mut calls = self.calls.lock().unwrap();
            calls.push((call.tool.clone(), call.args.clone()));
            let n = calls.len();
            let error = (*self.fail.lock().unwrap()).then(|| "refused".to_string());
            Ok(ToolReply {
                from_receipt: false,
                output: json!({"n": n}),
                artifacts: BTreeMap::from([("out".to_string(), json!(n))]),
                error,
            })
        }
    }

    fn call(task: uuid::Uuid, tool: &str, args: Value, repeat: Repeat) -> ToolCall {
        ToolCall {
            task_id: task,
            tool: tool.into(),
            args,
            repeat,
        }
    }

    fn wrapped() -> (Arc<Counting>, Receipted<Counting>, Arc<MemoryReceipts>) {
        let inner = Arc::new(Counting::default());
        let receipts = Arc::new(MemoryReceipts::default());
        let port = Receipted::new(inner.clone(), receipts.clone(), Arc::new(SystemClock));
        (inner, port, receipts)
    }

    #[tokio::test]
    async fn an_identical_write_is_performed_once_and_answered_from_its_receipt() {
        let (inner, port, receipts) = wrapped();
        let task = uuid::Uuid::new_v4();
        let first = port
            .call(call(task, "write", json!({"a": 1, "b": 2}), Repeat::Nth(0)))
            .await
            .unwrap();
        // The same action with its arguments in another order: the same key.
        let again = port
            .call(call(task, "write", json!({"b": 2, "a": 1}), Repeat::Nth(0)))
            .await
            .unwrap();
        assert_eq!(first, again);
        assert_eq!(inner.calls.lock().unwrap().len(), 1);
        assert_eq!(receipts.len(), 1);
        // A deliberate second occurrence, other arguments, another task: each performed.
        port.call(call(task, "write", json!({"a": 1, "b": 2}), Repeat::Nth(1)))
            .await
            .unwrap();
        port.call(call(task, "write", json!({"a": 2}), Repeat::Nth(0)))
            .await
            .unwrap();
        let other = uuid::Uuid::new_v4();
        port.call(call(
            other,
            "write",
            json!({"a": 1, "b": 2}),
            Repeat::Nth(0),
        ))
        .await
        .unwrap();
        assert_eq!(inner.calls.lock().unwrap().len(), 4);
    }

    #[tokio::test]
    async fn reads_always_reach_the_tool_and_a_reported_error_is_not_kept() {
        let (inner, port, receipts) = wrapped();
        let task = uuid::Uuid::new_v4();
        for _ in 0..2 {
            port.call(call(task, "read", json!({}), Repeat::Nth(0)))
                .await
                .unwrap();
        }
        assert_eq!(inner.calls.lock().unwrap().len(), 2);
        assert!(receipts.is_empty());
        *inner.fail.lock().unwrap() = true;
        let refused = port
            .call(call(task, "write", json!({}), Repeat::Nth(0)))
            .await
            .unwrap();
        assert_eq!(refused.error.as_deref(), Some("refused"));
        assert!(receipts.is_empty());
        *inner.fail.lock().unwrap() = false;
        let done = port
            .call(call(task, "write", json!({}), Repeat::Nth(0)))
            .await
            .unwrap();
        assert_eq!(done.error, None);
        assert_eq!(inner.calls.lock().unwrap().len(), 4);
        assert_eq!(receipts.len(), 1);
    }
}
