//! The registry as serving sees it: swapped whole when MCP servers are listed again, read as
//! a snapshot. A plan is made against the snapshot of its time; a tool gone since is
//! `tool_unavailable` when a step calls it.

use std::sync::{Arc, RwLock};

use super::ToolRegistry;

/// A registry that can be replaced while readers hold the previous one. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct SharedRegistry(Arc<RwLock<Arc<ToolRegistry>>>);

impl SharedRegistry {
    pub fn new(registry: Arc<ToolRegistry>) -> SharedRegistry {
        SharedRegistry(Arc::new(RwLock::new(registry)))
    }

    /// The registry now.
    pub fn current(&self) -> Arc<ToolRegistry> {
        self.0
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    pub fn replace(&self, registry: Arc<ToolRegistry>) {
        *self
            .0
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = registry;
    }
}
