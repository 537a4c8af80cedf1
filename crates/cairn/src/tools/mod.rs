//! Tools: the operator-maintained registry, and the HTTP client that calls them.
//!
//! Tools are registered by operators in a file ([`registry`]), never by goal submitters, so a
//! goal cannot make cairn call an arbitrary URL. A call ([`client`]) is checked against the
//! tool's JSON Schema before anything is sent, carries a deterministic idempotency key
//! ([`key`]) derived from what it does (task, tool, canonical arguments, and a repeat counter
//! only where a plan repeats an action on purpose), and, for a tool with side effects, stores
//! its result as a receipt ([`receipts`]): an identical call whose key already has a receipt
//! (a resumed step, a retry, a repaired or re-planned step) gets the stored result and the
//! tool is not called again.
//!
//! Tools also come from MCP servers the registry file names ([`mcp`]); they are called through
//! the same client.
//!
//! The HTTP contract: `POST {"args": {...}}` with `Idempotency-Key` and `X-Cairn-Task`; the
//! answer is `{"output": any, "artifacts"?: {name: value}, "error"?: string}`.

pub mod catalog;
pub mod client;
pub mod error;
pub mod key;
pub mod mcp;
pub mod receipts;
pub mod registry;

pub use catalog::ToolCatalog;
pub use client::{ToolCall, ToolClient, ToolResult};
pub use error::{ToolError, ToolFailure};
pub use key::{Repeat, idempotency_key};
pub use receipts::{MemoryReceipts, ReceiptStore, StoreReceipts};
pub use registry::{RegistryError, SharedRegistry, ToolRegistry, ToolSource, ToolSpec, ToolsFile};
