//! The tools of a shadow run: every side-effecting tool sent to its `sandbox_url`, or refused
//! when it has none, so the real world is never touched by a shadow. Read-only tools still
//! reach their real endpoint: they change nothing, and a shadow that cannot observe the world
//! would measure nothing.

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;

use super::adapters::ClientTools;
use super::ports::{FailureKind, PortError, ToolCall, ToolPort, ToolReply, ToolSpec};
use crate::tools::{RegistryError, ToolClient, ToolRegistry};

/// Tools as a shadow sees them: side-effecting calls go to the sandbox or are refused.
pub struct ShadowTools {
    inner: ClientTools,
    /// Side-effecting tools without a `sandbox_url`.
    refused: BTreeSet<String>,
}

impl ShadowTools {
    /// Builds the shadow's view of the `live` client's registry: every side-effecting tool's
    /// URL replaced by its sandbox URL; those without one are refused at call time (and still
    /// listed, so the plan and the refusal are both visible). The shadow keeps the live
    /// client's receipts, clock and HTTP connections (one TLS set-up per process).
    pub fn new(live: &ToolClient) -> Result<ShadowTools, RegistryError> {
        let mut refused = BTreeSet::new();
        let specs = live
            .registry()
            .specs()
            .cloned()
            .map(|mut spec| {
                if spec.side_effects {
                    match spec.sandbox_url.clone() {
                        Some(sandbox) => spec.url = sandbox,
                        None => {
                            refused.insert(spec.name.clone());
                        }
                    }
                }
                spec
            })
            .collect();
        let sandboxed = ToolRegistry::from_specs(specs, "shadow (sandboxed)")?;
        let client = live.with_registry(Arc::new(sandboxed));
        Ok(ShadowTools {
            inner: ClientTools::new(client),
            refused,
        })
    }

    pub fn refused(&self) -> &BTreeSet<String> {
        &self.refused
    }
}

#[async_trait]
impl ToolPort for ShadowTools {
    fn specs(&self) -> Vec<ToolSpec> {
        self.inner.specs()
    }

    async fn call(&self, call: ToolCall) -> Result<ToolReply, PortError> {
        if self.refused.contains(&call.tool) {
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
