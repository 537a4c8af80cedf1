//! The MCP servers' tools in the registry: listed at start, on `POST /v1/tools/refresh`, when
//! a server's cache hint expires, and every few seconds for a server that has not answered.
//!
//! A server that is down is reported (`GET /v1/tools`, `servers`), never fatal: its tools
//! appear when it answers. A listing that fails keeps the tools listed before (calls to them
//! then fail as the server does); a tool the server no longer lists leaves the registry.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::clock::Clock;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::config::McpServerSpec;
use super::hub::McpHub;
use super::map;
use crate::tools::registry::{SharedRegistry, ToolRegistry, ToolSource, ToolSpec};

/// How often a server that has not answered is asked again.
pub const RETRY: Duration = Duration::from_secs(5);
/// How often the refresher looks for servers that are due.
const TICK: Duration = Duration::from_secs(1);

/// A server as `GET /v1/tools` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct McpServerStatus {
    pub name: String,
    pub url: String,
    /// Names of the headers sent (their values are never shown).
    pub headers: Vec<String>,
    pub reachable: bool,
    /// The protocol revision negotiated at the last listing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// How many of its tools are registered.
    pub tools: usize,
    /// Listed tools not registered, each with why (denied, not allowed, an unusable schema).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listed_at: Option<DateTime<Utc>>,
}

struct Listed {
    tools: Vec<ToolSpec>,
    status: McpServerStatus,
    due: Instant,
}

/// The registered servers, their connections and their last listings.
pub struct McpCatalog {
    file: ToolRegistry,
    servers: Vec<McpServerSpec>,
    hub: McpHub,
    shared: SharedRegistry,
    clock: Arc<dyn Clock>,
    relist_min: Duration,
    listed: Mutex<BTreeMap<String, Listed>>,
}

/// What a catalog is made of.
pub struct McpCatalogParams {
    /// The registry file's own tools.
    pub file: ToolRegistry,
    pub servers: Vec<McpServerSpec>,
    pub hub: McpHub,
    /// Replaced on each listing.
    pub shared: SharedRegistry,
    pub clock: Arc<dyn Clock>,
    /// The shortest time between two listings of one server, whatever its cache hint.
    pub relist_min: Duration,
}

impl std::fmt::Debug for McpCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpCatalog")
            .field("servers", &self.servers.len())
            .finish_non_exhaustive()
    }
}

impl McpCatalog {
    /// The catalog of `servers` beside the file's own tools. Nothing is listed until
    /// [`McpCatalog::refresh`].
    pub fn new(params: McpCatalogParams) -> McpCatalog {
        let McpCatalogParams {
            file,
            servers,
            hub,
            shared,
            clock,
            relist_min,
        } = params;
        let now = Instant::now();
        let listed = servers
            .iter()
            .map(|server| {
                let status = McpServerStatus {
                    name: server.name.clone(),
                    url: server.url.clone(),
                    headers: server
                        .headers
                        .iter()
                        .map(|(name, _)| name.clone())
                        .collect(),
                    reachable: false,
                    protocol: None,
                    tools: 0,
                    skipped: Vec::new(),
                    error: Some("not listed yet".into()),
                    listed_at: None,
                };
                let entry = Listed {
                    tools: Vec::new(),
                    status,
                    due: now,
                };
                (server.name.clone(), entry)
            })
            .collect();
        McpCatalog {
            file,
            servers,
            hub,
            shared,
            clock,
            relist_min,
            listed: Mutex::new(listed),
        }
    }

    pub fn hub(&self) -> &McpHub {
        &self.hub
    }

    pub fn server(&self, name: &str) -> Option<&McpServerSpec> {
        self.servers.iter().find(|server| server.name == name)
    }

    pub fn statuses(&self) -> Vec<McpServerStatus> {
        self.lock().values().map(|l| l.status.clone()).collect()
    }

    /// Lists every server now; returns their statuses.
    pub async fn refresh(&self) -> Vec<McpServerStatus> {
        for server in &self.servers {
            self.list(server).await;
        }
        self.rebuild();
        self.statuses()
    }

    /// Lists the servers whose listing is due; true when any was.
    async fn refresh_due(&self) -> bool {
        let now = Instant::now();
        let due: Vec<&McpServerSpec> = {
            let listed = self.lock();
            self.servers
                .iter()
                .filter(|s| listed.get(&s.name).is_some_and(|l| l.due <= now))
                .collect()
        };
        for server in &due {
            self.list(server).await;
        }
        if !due.is_empty() {
            self.rebuild();
        }
        !due.is_empty()
    }

    /// Keeps listings fresh until the catalog is dropped.
    pub fn spawn_refresher(self: &Arc<Self>) {
        let catalog: Weak<McpCatalog> = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(TICK).await;
                let Some(catalog) = catalog.upgrade() else {
                    return;
                };
                catalog.refresh_due().await;
            }
        });
    }

    async fn list(&self, server: &McpServerSpec) {
        let answer = self.hub.list(server).await;
        let mut listed = self.lock();
        let Some(entry) = listed.get_mut(&server.name) else {
            return;
        };
        match answer {
            Ok(listing) => {
                let mut tools = Vec::new();
                let mut skipped = Vec::new();
                for tool in &listing.tools {
                    if !server.offers(&tool.name) {
                        skipped.push(format!("{}: not offered by the registry", tool.name));
                        continue;
                    }
                    match map::spec(server, tool) {
                        Ok(spec) if self.file.contains(&spec.name) => {
                            skipped.push(format!("{}: a registry tool has that name", spec.name))
                        }
                        Ok(spec) => tools.push(spec),
                        Err(why) => skipped.push(format!("{}: {why}", tool.name)),
                    }
                }
                entry.status.reachable = true;
                entry.status.protocol = Some(listing.protocol);
                entry.status.tools = tools.len();
                entry.status.skipped = skipped;
                entry.status.error = None;
                entry.status.listed_at = Some(self.clock.now());
                entry.tools = tools;
                // Without a cache hint, a listing holds until the next refresh.
                let ttl = listing.ttl.unwrap_or(Duration::from_secs(365 * 24 * 3600));
                entry.due = Instant::now() + ttl.max(self.relist_min).max(TICK);
            }
            Err(error) => {
                tracing::warn!(server = %server.name, url = %server.url, %error,
                    "MCP server did not list its tools; trying again");
                entry.status.reachable = false;
                entry.status.error = Some(error.to_string());
                entry.due = Instant::now() + RETRY;
            }
        }
    }

    /// The file's tools and every server's, into the shared registry.
    fn rebuild(&self) {
        let mut specs: Vec<(ToolSpec, ToolSource)> = self
            .file
            .tools()
            .map(|tool| (tool.spec.clone(), tool.source.clone()))
            .collect();
        for (server, listed) in self.lock().iter() {
            for spec in &listed.tools {
                let tool = spec
                    .name
                    .strip_prefix(&format!("{server}."))
                    .unwrap_or(&spec.name)
                    .to_string();
                let source = ToolSource::Mcp {
                    server: server.clone(),
                    tool,
                };
                specs.push((spec.clone(), source));
            }
        }
        match ToolRegistry::from_sourced(specs, "MCP servers") {
            Ok(registry) => self.shared.replace(Arc::new(registry)),
            Err(error) => tracing::error!(%error, "MCP tools not registered"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Listed>> {
        self.listed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
