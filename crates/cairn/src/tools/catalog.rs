//! [`ToolCatalog`]: the registry serving runs on, and the MCP servers that feed it.

use std::sync::Arc;
use std::time::Duration;

use super::mcp::{McpCatalog, McpServerStatus};
use super::registry::{SharedRegistry, ToolRegistry};

/// How long serving waits at start for the MCP servers' first listings.
pub const START_WAIT: Duration = Duration::from_secs(10);

/// The registry (swapped when MCP servers are listed again) and the servers behind it.
/// Cheap to clone; every clone sees the same registry.
#[derive(Debug, Clone, Default)]
pub struct ToolCatalog {
    shared: SharedRegistry,
    mcp: Option<Arc<McpCatalog>>,
}

impl ToolCatalog {
    /// A registry that never changes (no MCP server).
    pub fn fixed(registry: Arc<ToolRegistry>) -> ToolCatalog {
        ToolCatalog {
            shared: SharedRegistry::new(registry),
            mcp: None,
        }
    }

    /// A registry fed by MCP servers; `shared` is what `mcp` replaces.
    pub fn with_mcp(shared: SharedRegistry, mcp: Arc<McpCatalog>) -> ToolCatalog {
        ToolCatalog {
            shared,
            mcp: Some(mcp),
        }
    }

    /// The registry now.
    pub fn current(&self) -> Arc<ToolRegistry> {
        self.shared.current()
    }

    pub fn mcp(&self) -> Option<&Arc<McpCatalog>> {
        self.mcp.as_ref()
    }

    /// The MCP servers' statuses (none without MCP).
    pub fn servers(&self) -> Vec<McpServerStatus> {
        self.mcp.as_ref().map(|m| m.statuses()).unwrap_or_default()
    }

    /// Lists every MCP server again now.
    pub async fn refresh(&self) -> Vec<McpServerStatus> {
        match &self.mcp {
            Some(mcp) => mcp.refresh().await,
            None => Vec::new(),
        }
    }

    /// Lists the servers once, waiting at most [`START_WAIT`] (a server slower than that is
    /// listed in the background, like one that is down), and keeps them fresh afterwards.
    pub async fn start(&self) {
        if let Some(mcp) = &self.mcp {
            if tokio::time::timeout(START_WAIT, mcp.refresh())
                .await
                .is_err()
            {
                tracing::warn!(
                    "MCP servers still listing after 10 s; serving without them for now"
                );
            }
            mcp.spawn_refresher();
        }
    }
}

impl From<Arc<ToolRegistry>> for ToolCatalog {
    fn from(registry: Arc<ToolRegistry>) -> ToolCatalog {
        ToolCatalog::fixed(registry)
    }
}
