//! MCP tool servers as cairn tools.
//!
//! An operator registers a server in the tools file (`[[mcp]]`, [`config`]); cairn lists its
//! tools ([`catalog`]) and registers each as `server.tool` with its input schema, description
//! and hints ([`map`]), and calls them through the same client path as HTTP tools: the schema
//! check, receipts for side effects, timeouts and failure classes (`crate::tools::client`).
//!
//! Transport: streamable HTTP only ([`hub`]). A stdio server is a local process, which a
//! multi-tenant service does not start on a goal's behalf; an operator who wants one wraps it
//! in an HTTP endpoint. `input_required`, sampling and elicitation requests end the call as a
//! tool error naming what the server asked for.
//!
//! An MCP call carries no idempotency key the server honours, so a side-effecting call writes
//! an intent before it is sent: a call whose intent has no receipt (the process died, or the
//! stream dropped, while it was in flight) is never resent; it ends `outcome_unknown` for the
//! repair ladder, unless the tool is idempotent.

pub mod catalog;
pub mod config;
pub mod error;
pub mod hub;
pub mod map;
mod oauth;

pub use catalog::{McpCatalog, McpCatalogParams, McpServerStatus};
pub use config::McpServerSpec;
pub use error::McpError;
pub use hub::{McpCall, McpHub};
