//! The tools of a shadow run: every side-effecting tool sent to its `sandbox_url`, or refused
//! when it has none, so the real world is never touched by a shadow. Read-only tools still
//! reach their real endpoint: they change nothing, and a shadow that cannot observe the world
//! would measure nothing.

use std::collections::BTreeSet;

use async_trait::async_trait;

use super::adapters::ClientTools;
use super::ports::{FailureKind, PortError, ToolCall, ToolPort, ToolReply, ToolSpec};
use crate::tools::ToolClient;

/// Tools as a shadow sees them: side-effecting calls go to the sandbox or are refused.
pub struct ShadowTools {
    live: ToolClient,
    inner: ClientTools,
}

impl ShadowTools {
    /// The shadow's view of the `live` client's registry, read at each call (MCP servers may
    /// change it): a side-effecting tool is sent to its `sandbox_url`, or refused at call time
    /// when it has none (and still listed, so the plan and the refusal are both visible). The
    /// shadow keeps the live client's receipts, clock and HTTP connections.
    pub fn new(live: &ToolClient) -> ShadowTools {
        ShadowTools {
            live: live.clone(),
            inner: ClientTools::sandboxed(live.clone()),
        }
    }

    /// Side-effecting tools without a `sandbox_url`, now.
    pub fn refused(&self) -> BTreeSet<String> {
        self.live
            .registry()
            .specs()
            .filter(|spec| unsandboxed(spec))
            .map(|spec| spec.name.clone())
            .collect()
    }
}

/// A tool a shadow may not call: it writes and has no sandbox.
fn unsandboxed(spec: &crate::tools::ToolSpec) -> bool {
    spec.side_effects && spec.sandbox_url.is_none()
}

#[async_trait]
impl ToolPort for ShadowTools {
    fn specs(&self) -> Vec<ToolSpec> {
        self.inner.specs()
    }

    async fn call(&self, call: ToolCall) -> Result<ToolReply, PortError> {
        // One lookup per call, not the whole refused set.
        let registry = self.live.registry();
        if registry
            .get(&call.tool)
            .is_some_and(|t| unsandboxed(&t.spec))
        {
            return Err(PortError::new(
                FailureKind::Permanent,
                format!(
                    "{}: refused in a shadow run (side effects and no sandbox_url)",
                    call.tool
                ),
            ));
        }
        self.inner.call(call).await
    }
}
