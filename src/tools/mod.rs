//! Tools: the operator-maintained registry, and the HTTP client that calls them.
//!
//! Tools are registered by operators in a file ([`registry`]), never by goal submitters, so a
//! goal cannot make cairn call an arbitrary URL. A call ([`client`]) is checked against the
//! tool's JSON Schema before anything is sent, carries a deterministic idempotency key
//! ([`key`]) derived from the task, milestone, step and logical attempt, and, for a tool with
//! side effects, stores its result as a receipt ([`receipts`]): a resumed step whose key
//! already has a receipt gets the stored result and the tool is not called again.
//!
//! The HTTP contract: `POST {"args": {...}}` with `Idempotency-Key` and `X-Cairn-Task`; the
//! answer is `{"output": any, "artifacts"?: {name: value}, "error"?: string}`.

pub mod client;
pub mod error;
pub mod key;
pub mod receipts;
pub mod registry;

pub use client::{ToolCall, ToolClient, ToolResult};
pub use error::{ToolError, ToolFailure};
pub use key::idempotency_key;
pub use receipts::{MemoryReceipts, ReceiptStore, StoreReceipts};
pub use registry::{RegistryError, ToolRegistry, ToolSpec};
