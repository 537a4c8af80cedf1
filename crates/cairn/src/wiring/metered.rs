//! The model and tool ports with their calls counted ([`Meters`]): each wraps the port the
//! engines call, so every strategy's calls (planned, direct, baselines, shadow copies) are
//! counted alike, without the engine knowing.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use crate::engine::runtime::ports::{
    ModelCall, ModelPort, ModelReply, PortError, ToolCall, ToolPort, ToolReply, ToolSpec,
    tool_outcome,
};
use crate::meters::{Meters, ModelCallRecord};

/// A model port whose calls are counted by purpose, model and outcome, with their tokens.
pub struct MeteredModels {
    pub inner: Arc<dyn ModelPort>,
    pub meters: Meters,
}

#[async_trait]
impl ModelPort for MeteredModels {
    async fn complete(&self, call: ModelCall) -> Result<ModelReply, PortError> {
        let purpose = call.purpose.as_str();
        let result = self.inner.complete(call).await;
        let (model, ok, split) = match &result {
            Ok(reply) => (reply.model.as_deref(), true, reply.split),
            Err(error) => (None, false, error.split),
        };
        self.meters.model_call(&ModelCallRecord {
            purpose,
            model: model.unwrap_or("unknown"),
            ok,
            input_tokens: split.input,
            output_tokens: split.output,
        });
        result
    }
}

/// A tool port whose calls are counted by tool and outcome (`ok`, `error` when the tool
/// answered one, `receipt` when a stored receipt answered and the tool was not called, or the
/// failure's class), and timed.
pub struct MeteredTools {
    pub inner: Arc<dyn ToolPort>,
    pub meters: Meters,
}

#[async_trait]
impl ToolPort for MeteredTools {
    fn specs(&self) -> Vec<ToolSpec> {
        self.inner.specs()
    }

    async fn call(&self, call: ToolCall) -> Result<ToolReply, PortError> {
        let tool = call.tool.clone();
        let started = Instant::now();
        let result = self.inner.call(call).await;
        let outcome = tool_outcome(&result);
        self.meters.tool_call(&tool, outcome, started.elapsed());
        result
    }
}
